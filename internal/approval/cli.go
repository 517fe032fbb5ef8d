package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// DefaultAdminURL is where the CLI finds the admin API without TOLLGATE_ADMIN_URL.
const DefaultAdminURL = "http://127.0.0.1:7469"

// CLI exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

const cliUsage = `usage: tollgate approvals <command> [flags]

commands:
  list [flags]                    list approval requests, one page (newest first)
    --status S                    pending (default), approved, rejected, all, or a task state
    --sort O                      newest (default), oldest, or expiry (soonest deadline first)
    --tool GLOB                   tool name or glob (the syntax of rules' match)
    --owner HASH                  owner hash as shown by show and summary ("none": no owner)
    --workflow W                  approval workflow
    --limit N                     page size (default 100; with --all 1000; at most 1000)
    --cursor C                    the page after the one that printed C
    --all                         follow the cursors and print every page
  summary [--top N]               pending requests in all and per owner, tool and workflow
                                  (the N largest of each, default 10)
  show ID                         show one approval request
  explain ID                      why it is held: the rule, each Cedar policy satisfied or
                                  failing, the outcome and what would change it
  approve ID [--reason R]         approve a pending request
  reject ID [--reason R]          reject a pending request (a reason helps the requester)

flags (any command):
  --json                          print the API's JSON instead of a table

environment:
  TOLLGATE_ADMIN_URL    admin API base URL (default ` + DefaultAdminURL + `)
  TOLLGATE_ADMIN_TOKEN  approver bearer token
  TOLLGATE_ADMIN_TOKEN_FILE  a file holding it instead (a mounted Secret)
`

// cliTimeout bounds one API call; the admin API answers at once (it never waits for tasks).
const cliTimeout = 30 * time.Second

// RunCLI runs `tollgate approvals …`; args excludes "approvals". It returns the exit code:
// 0 ok, 1 API or connection error, 2 usage error.
func RunCLI(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, cliUsage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	if cmd == "help" || cmd == "-h" || cmd == "--help" || cmd == "-help" {
		fmt.Fprint(stdout, cliUsage)
		return exitOK
	}

	fs := flag.NewFlagSet("tollgate approvals "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	var reason *string
	var lf listFlags
	var top *int
	wantID := true
	switch cmd {
	case "list":
		wantID = false
		lf.status = fs.String("status", "", "status filter")
		lf.sort = fs.String("sort", SortNewest, "sort order")
		lf.tool = fs.String("tool", "", "tool name or glob")
		lf.owner = fs.String("owner", "", "owner hash")
		lf.workflow = fs.String("workflow", "", "workflow")
		lf.cursor = fs.String("cursor", "", "page cursor")
		lf.limit = fs.Int("limit", 0, "page size")
		lf.all = fs.Bool("all", false, "every page")
	case "summary":
		wantID = false
		top = fs.Int("top", 0, "groups shown of each kind")
	case "show", "explain":
	case "approve", "reject":
		reason = fs.String("reason", "", "reason for the decision")
	default:
		return usageError(stderr, fmt.Sprintf("unknown command %q", cmd))
	}
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		return usageError(stderr, err.Error())
	}
	var id string
	switch {
	case wantID && len(pos) != 1:
		return usageError(stderr, fmt.Sprintf("%s needs exactly one task ID", cmd))
	case !wantID && len(pos) != 0:
		return usageError(stderr, fmt.Sprintf("%s takes no arguments, got %q", cmd, pos))
	case wantID:
		id = pos[0]
		if id == "" || strings.ContainsAny(id, "/?#") {
			return usageError(stderr, fmt.Sprintf("invalid task ID %q", id))
		}
	}

	c, err := newClient(getenv)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return exitUsage
	}

	var body []byte
	switch cmd {
	case "list":
		if *lf.all && *lf.cursor != "" {
			return usageError(stderr, "--all and --cursor exclude each other")
		}
		body, err = c.list(ctx, lf)
	case "summary":
		path := "/api/v1/approvals/summary"
		if *top != 0 {
			path += "?top=" + fmt.Sprint(*top)
		}
		body, err = c.do(ctx, http.MethodGet, path, nil)
	case "show":
		body, err = c.do(ctx, http.MethodGet, "/api/v1/approvals/"+url.PathEscape(id), nil)
	case "explain":
		body, err = c.do(ctx, http.MethodGet, "/api/v1/approvals/"+url.PathEscape(id)+"/explain", nil)
	default:
		req, _ := json.Marshal(map[string]string{"reason": *reason})
		body, err = c.do(ctx, http.MethodPost, "/api/v1/approvals/"+url.PathEscape(id)+"/"+cmd, req)
	}
	if err != nil {
		if ae, ok := errors.AsType[*apiError](err); ok && *asJSON && len(ae.body) > 0 {
			writeRaw(stdout, ae.body)
		}
		fmt.Fprintln(stderr, "error:", sanitize(err.Error()))
		return exitError
	}
	if *asJSON {
		writeRaw(stdout, body)
		return exitOK
	}

	switch cmd {
	case "explain":
		var er explainText
		if err := json.Unmarshal(body, &er); err != nil || er.Explanation == nil {
			// Not the shape printed below: the API's JSON, indented.
			var out bytes.Buffer
			if json.Indent(&out, body, "", "  ") != nil {
				fmt.Fprintln(stderr, "error: unexpected response from admin API")
				return exitError
			}
			writeRaw(stdout, []byte(sanitizeMultiline(out.String())))
			return exitOK
		}
		printExplain(stdout, er)
	case "list":
		var lr ListResponse
		if err := json.Unmarshal(body, &lr); err != nil {
			fmt.Fprintln(stderr, "error: unexpected response from admin API:", err)
			return exitError
		}
		printList(stdout, lr)
	case "summary":
		var sr SummaryResponse
		if err := json.Unmarshal(body, &sr); err != nil {
			fmt.Fprintln(stderr, "error: unexpected response from admin API:", err)
			return exitError
		}
		printSummary(stdout, sr)
	default:
		var v View
		if err := json.Unmarshal(body, &v); err != nil {
			fmt.Fprintln(stderr, "error: unexpected response from admin API:", err)
			return exitError
		}
		switch {
		case cmd == "approve" && v.State == "awaiting_approval":
			// one vote of several (min_approvals): the call still waits for other approvers
			fmt.Fprintf(stdout, "approval recorded for %s (%s): %s; waiting for another approver\n",
				sanitize(v.TaskID), sanitize(v.Tool), approvalsText(v))
		case cmd != "show":
			fmt.Fprintf(stdout, "%s %s (%s)\n", pastTense(cmd), sanitize(v.TaskID), sanitize(v.Tool))
		}
		printView(stdout, v)
	}
	return exitOK
}

func usageError(stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "error: %s\n\n%s", msg, cliUsage)
	return exitUsage
}

func pastTense(cmd string) string {
	if cmd == "approve" {
		return "approved"
	}
	return "rejected"
}

// parseInterspersed parses flags before and after positional arguments ("approve ID --reason
// R" and "approve --reason R ID" both work); "--" ends flag parsing.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// flag stops after consuming "--" or at the first non-flag argument.
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

type listFlags struct {
	status, sort, tool, owner, workflow, cursor *string
	limit                                       *int
	all                                         *bool
}

// list fetches one page, or with --all every page (following nextCursor), and returns the
// body of one ListResponse.
func (c *client) list(ctx context.Context, lf listFlags) ([]byte, error) {
	q := url.Values{}
	for name, v := range map[string]string{"status": *lf.status, "sort": *lf.sort, "tool": *lf.tool,
		"owner": *lf.owner, "workflow": *lf.workflow, "cursor": *lf.cursor} {
		if v != "" {
			q.Set(name, v)
		}
	}
	limit := *lf.limit
	if limit == 0 && *lf.all {
		limit = MaxListLimit
	}
	if limit != 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	path := "/api/v1/approvals?" + q.Encode()
	if !*lf.all {
		return c.do(ctx, http.MethodGet, path, nil)
	}
	var all ListResponse
	seen := map[string]bool{}
	for {
		body, err := c.do(ctx, http.MethodGet, path, nil)
		if err != nil {
			return nil, err
		}
		var lr ListResponse
		if err := json.Unmarshal(body, &lr); err != nil {
			return nil, fmt.Errorf("unexpected response from admin API: %w", err)
		}
		all.Approvals = append(all.Approvals, lr.Approvals...)
		if lr.NextCursor == "" {
			break
		}
		if seen[lr.NextCursor] { // a page may be empty (the server bounds its scan), never repeated
			return nil, errors.New("admin API repeated a page cursor; stopped following it")
		}
		seen[lr.NextCursor] = true
		q.Set("cursor", lr.NextCursor)
		path = "/api/v1/approvals?" + q.Encode()
	}
	if all.Approvals == nil {
		all.Approvals = []View{}
	}
	return json.Marshal(all)
}

type client struct {
	base  string
	token string
	http  *http.Client
}

func newClient(getenv func(string) string) (*client, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	base := strings.TrimSpace(getenv("TOLLGATE_ADMIN_URL"))
	if base == "" {
		base = DefaultAdminURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("TOLLGATE_ADMIN_URL %q is not an http(s) URL", base)
	}
	token, err := AdminToken(getenv)
	if err != nil {
		return nil, err
	}
	return &client{
		base:  strings.TrimRight(base, "/"),
		token: token,
		http:  &http.Client{Timeout: cliTimeout},
	}, nil
}

// AdminToken is the approver token the CLI sends: $TOLLGATE_ADMIN_TOKEN, or the contents of
// the file $TOLLGATE_ADMIN_TOKEN_FILE names (a Secret mounted as files, as `tollgate run`
// reads it), so `kubectl exec … tollgate approvals` works in a pod whose environment holds
// no secret. Both set is an error, as for `tollgate run`; neither gives "" (the API refuses).
func AdminToken(getenv func(string) string) (string, error) {
	name := config.EnvAdminToken
	path := strings.TrimSpace(getenv(name + config.FileSuffix))
	if path == "" {
		return strings.TrimSpace(getenv(name)), nil
	}
	if strings.TrimSpace(getenv(name)) != "" {
		return "", fmt.Errorf("$%s and $%s are both set; set one", name, name+config.FileSuffix)
	}
	tok, err := config.ReadSecretFile(path, "$"+name+config.FileSuffix, 1)
	return strings.TrimSpace(tok), err
}

// apiError is a non-2xx reply of the admin API.
type apiError struct {
	status int
	resp   ErrorResponse
	body   []byte
}

func (e *apiError) Error() string {
	switch {
	case e.status == http.StatusConflict && e.resp.Approval != nil && e.resp.Approval.Decision != nil:
		d := e.resp.Approval.Decision
		s := fmt.Sprintf("already decided: %s by %s at %s", decisionWord(d.Approved), d.By, d.At.Format(time.RFC3339))
		if d.Reason != "" {
			s += fmt.Sprintf(" (reason: %s)", d.Reason)
		}
		return s
	case e.resp.Message != "":
		return fmt.Sprintf("%s (HTTP %d)", e.resp.Message, e.status)
	}
	return fmt.Sprintf("admin API answered HTTP %d %s", e.status, http.StatusText(e.status))
}

func (c *client) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cliTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("cannot reach the Tollgate admin API at %s: connection refused (is tollgate running? set TOLLGATE_ADMIN_URL)", c.base)
		}
		// Do's error names the URL (never the token, which travels in a header).
		return nil, fmt.Errorf("cannot reach the Tollgate admin API at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("reading admin API response from %s: %w", c.base, err)
	}
	if resp.StatusCode == http.StatusUnauthorized {
		if c.token == "" {
			return nil, errors.New("admin token rejected: set TOLLGATE_ADMIN_TOKEN (it is empty)")
		}
		return nil, errors.New("admin token rejected: set TOLLGATE_ADMIN_TOKEN")
	}
	if resp.StatusCode/100 != 2 {
		ae := &apiError{status: resp.StatusCode, body: b}
		_ = json.Unmarshal(b, &ae.resp)
		return nil, ae
	}
	return b, nil
}

func writeRaw(w io.Writer, b []byte) {
	b = bytes.TrimRight(b, "\n")
	_, _ = w.Write(append(b, '\n'))
}

func printList(w io.Writer, lr ListResponse) {
	if len(lr.Approvals) == 0 {
		fmt.Fprintln(w, "no approvals")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK ID\tTOOL\tWORKFLOW\tSTATE\tREQUESTED BY\tOWNER\tCREATED\tDEADLINE")
	for _, v := range lr.Approvals {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			cell(v.TaskID), cell(v.Tool), cell(v.Workflow), cell(stateText(v)), cell(v.RequestedBy), cell(v.Owner),
			v.CreatedAt.Format(time.RFC3339), timeOrDash(v.ApprovalDeadline))
	}
	_ = tw.Flush()
	switch {
	case lr.NextCursor != "":
		fmt.Fprintf(w, "(more approvals exist: next page with --cursor %s, or use --all; `tollgate approvals summary` counts them per owner)\n", sanitize(lr.NextCursor))
	case lr.Truncated:
		fmt.Fprintln(w, "(more approvals exist; use --limit or --status to narrow)")
	}
}

// stateText is a list row's state, with what makes a pending call unable to run.
func stateText(v View) string {
	if c := v.CannotRun; c != nil {
		return v.State + " (CANNOT RUN: " + c.Reason + ")"
	}
	if v.RequesterNotWaiting != nil {
		return v.State + " (requester not waiting)"
	}
	return v.State
}

func printSummary(w io.Writer, sr SummaryResponse) {
	fmt.Fprintf(w, "%d pending\n", sr.Pending)
	for _, g := range []struct {
		name string
		b    Breakdown
	}{{"OWNER", sr.Owners}, {"TOOL", sr.Tools}, {"WORKFLOW", sr.Workflows}} {
		if len(g.b.Top) == 0 {
			continue
		}
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "%s\tPENDING\tNEXT DEADLINE\n", g.name)
		for _, c := range g.b.Top {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", cell(c.Key), c.Pending, timeOrDash(c.NextDeadline))
		}
		_ = tw.Flush()
		if g.b.OtherKeys > 0 {
			fmt.Fprintf(w, "(%d more: %d pending; --top N shows more)\n", g.b.OtherKeys, g.b.OtherPending)
		}
	}
}

func printView(w io.Writer, v View) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, val string) { fmt.Fprintf(tw, "%s:\t%s\n", k, cell(val)) }
	row("Task ID", v.TaskID)
	row("Tool", v.Tool)
	row("Workflow", v.Workflow)
	row("State", v.State+" ("+v.Status+")")
	if c := v.CannotRun; c != nil {
		row("CANNOT RUN", c.Message+" ["+c.Reason+"]")
	}
	if n := v.RequesterNotWaiting; n != nil {
		row("Requester", n.Message)
	}
	if v.StatusMessage != "" {
		row("Status message", v.StatusMessage)
	}
	row("Requested by", v.RequestedBy)
	row("Owner", v.Owner)
	row("Args hash", v.ArgsHash)
	row("Created", v.CreatedAt.Format(time.RFC3339))
	row("Approval deadline", timeOrDash(v.ApprovalDeadline))
	row("Expires", timeOrDash(v.ExpiresAt))
	if v.RequiredApprovals > 1 || len(v.Approvals) > 0 {
		row("Approvals", approvalsText(v))
	}
	if d := v.Decision; d != nil {
		row("Decision", fmt.Sprintf("%s by %s at %s", decisionWord(d.Approved), d.By, d.At.Format(time.RFC3339)))
		if d.Reason != "" {
			row("Reason", d.Reason)
		}
	}
	if f := v.Failure; f != nil {
		row("Failure", fmt.Sprintf("%s (%d)", f.Name, f.Code))
	}
	if p := v.PreviousRejection; p != nil {
		row("Rejected before", fmt.Sprintf("task %s by %s at %s", p.TaskID, p.By, p.At.Format(time.RFC3339)))
		if p.Reason != "" {
			row("Earlier reason", p.Reason)
		}
	}
	_ = tw.Flush()
	var args bytes.Buffer
	if err := json.Indent(&args, v.Arguments, "  ", "  "); err != nil {
		args.Reset()
		args.Write(v.Arguments)
	}
	fmt.Fprintf(w, "Arguments:\n  %s\n", sanitizeMultiline(args.String()))
}

// approvalsText is "k of N", with the approvers so far: "1 of 2 (alice)".
func approvalsText(v View) string {
	s := fmt.Sprintf("%d of %d", len(v.Approvals), max(v.RequiredApprovals, 1))
	if len(v.Approvals) > 0 {
		names := make([]string, len(v.Approvals))
		for i, a := range v.Approvals {
			names[i] = a.By
		}
		s += " (" + strings.Join(names, ", ") + ")"
	}
	return s
}

func timeOrDash(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339)
}

// cell makes a table cell safe: "-" for empty, control characters (terminal escapes, tabs and
// newlines that would break the table) shown escaped. Tool names, reasons and arguments come
// from callers and approvers and must not drive the operator's terminal.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return sanitize(s)
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return '?'
		}
		return r
	}, s)
}

// sanitizeMultiline is sanitize keeping newlines (json.Indent output).
func sanitizeMultiline(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = sanitize(l)
	}
	return strings.Join(lines, "\n")
}

// explainText is what `tollgate approvals explain` prints of GET /api/v1/approvals/{id}/explain
// (governance's Explanation, read here by its JSON names; --json prints the whole answer).
type explainText struct {
	TaskID      string `json:"taskId"`
	State       string `json:"state"`
	EvaluatedAt string `json:"evaluatedAt"`
	Explanation *struct {
		Tool string `json:"tool"`
		Rule struct {
			Index    int    `json:"index"`
			Match    string `json:"match"`
			Action   string `json:"action"`
			Workflow string `json:"workflow"`
			PolicyID string `json:"policy_id"`
			Mode     string `json:"mode"`
		} `json:"rule"`
		Policies []struct {
			ID, Effect, Decision, Position, Outcome, Error string
		} `json:"policies"`
		NotMatched int      `json:"policies_not_matched"`
		Cedar      string   `json:"cedar"`
		Outcome    string   `json:"outcome"`
		Would      string   `json:"would"`
		Workflow   string   `json:"workflow"`
		Changes    []string `json:"what_would_change_it"`
	} `json:"explanation"`
}

// printExplain writes an explanation for people, in the form of `tollgate policy explain`.
func printExplain(w io.Writer, er explainText) {
	x := er.Explanation
	fmt.Fprintf(w, "task:    %s (%s), evaluated at %s with the configuration loaded now\n", sanitize(er.TaskID), sanitize(er.State), sanitize(er.EvaluatedAt))
	fmt.Fprintf(w, "tool:    %s\n", sanitize(x.Tool))
	r := x.Rule
	where := "governance.defaults"
	if r.Index >= 0 && r.Match != "" {
		where = fmt.Sprintf("governance.rules[%d] %q", r.Index, r.Match)
	}
	extra := []string{r.Mode}
	if r.PolicyID != "" {
		extra = append(extra, "policy_id "+r.PolicyID)
	}
	if r.Workflow != "" {
		extra = append(extra, "workflow "+r.Workflow)
	}
	fmt.Fprintf(w, "rule:    %s → %s (%s)\n", sanitize(where), sanitize(r.Action), sanitize(strings.Join(extra, ", ")))
	if x.Cedar != "" {
		fmt.Fprintf(w, "cedar:   %s\n", sanitize(x.Cedar))
		for _, p := range x.Policies {
			kind := p.Effect
			if p.Decision == "approve" {
				kind += " @decision(approve)"
			}
			line := fmt.Sprintf("  %-9s %-26s %s  %s", p.Outcome, kind, p.ID, p.Position)
			if p.Error != "" {
				line += "  error: " + p.Error
			}
			fmt.Fprintln(w, sanitize(line))
		}
		if x.NotMatched > 0 {
			fmt.Fprintf(w, "  (%d other policies did not apply)\n", x.NotMatched)
		}
	}
	out := x.Outcome
	if x.Would != "" {
		out += fmt.Sprintf(" (audit mode: would %s)", x.Would)
	}
	if x.Workflow != "" {
		out += " — workflow " + x.Workflow
	}
	fmt.Fprintf(w, "outcome: %s\n", sanitize(out))
	fmt.Fprintln(w, "what would change it:")
	for _, c := range x.Changes {
		fmt.Fprintf(w, "  - %s\n", sanitize(c))
	}
}
