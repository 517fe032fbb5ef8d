package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/demo"
	"github.com/tollgate-mcp/tollgate/internal/mcpclient"
)

// defaultMCPURL is the demo's (and the default configuration's) MCP endpoint.
const defaultMCPURL = demo.DefaultMCPURL

// mcpURL is the endpoint `tollgate call` uses without --url: the one TOLLGATE_LISTEN moves the
// gateway (and the demo) to, else the default.
func mcpURL(getenv func(string) string) string {
	addr := getenv(config.EnvListen)
	if addr == "" {
		return defaultMCPURL
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return defaultMCPURL
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/mcp"
}

const callUsage = `Usage: tollgate call TOOL [JSON] [flags]

Calls one tool through Tollgate and says what happened: the result, a denial and its rule, or
a call held for approval (with the command that approves it) and then its outcome.

Flags:
  --url URL          MCP endpoint (default: http://$TOLLGATE_LISTEN/mcp when set, else
                     ` + defaultMCPURL + `)
  --era legacy|modern  protocol 2025-11-25 with a session (default) or 2026-07-28, stateless
  --task             make a task-augmented call and poll the task
  --header 'K: V'    add a request header (repeatable): Authorization, the identity header
  --wait DURATION    give up waiting for a decision after this long (default 10m)
  --json             print the result (or error) as JSON

Exit status: 0 the tool's result; 1 denied, rejected, failed, the tool reported an error,
or no answer in time; 2 usage.
`

type headerFlag http.Header

func (h headerFlag) String() string { return "" }

func (h headerFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	if k = strings.TrimSpace(k); !ok || k == "" {
		return fmt.Errorf("want 'Name: value', got %q", v)
	}
	http.Header(h).Add(k, strings.TrimSpace(val))
	return nil
}

// cmdCall is `tollgate call`: flags and printing; internal/mcpclient makes the call.
func cmdCall(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("call", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	url := fl.String("url", mcpURL(os.Getenv), "")
	era := fl.String("era", string(mcpclient.Legacy), "")
	task := fl.Bool("task", false, "")
	wait := fl.Duration("wait", 10*time.Minute, "")
	asJSON := fl.Bool("json", false, "")
	hdr := headerFlag{}
	fl.Var(hdr, "header", "")
	// Flags may come before, between or after TOOL and JSON.
	var pos []string
	for {
		if err := fl.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, callUsage)
				return 0
			}
			fmt.Fprintf(stderr, "tollgate call: %v\n\n%s", err, callUsage)
			return 2
		}
		if fl.NArg() == 0 {
			break
		}
		pos, args = append(pos, fl.Arg(0)), fl.Args()[1:]
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "tollgate call: "+format+"\n\n%s", append(a, callUsage)...)
		return 2
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usage("want TOOL and at most one JSON argument object")
	}
	var argv json.RawMessage
	if len(pos) == 2 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(pos[1]), &obj); err != nil || obj == nil {
			return usage("the arguments must be one JSON object, e.g. '{\"path\":\"/etc/motd\"}'")
		}
		argv = json.RawMessage(pos[1])
	}
	if *era != string(mcpclient.Legacy) && *era != string(mcpclient.Modern) {
		return usage("--era is legacy or modern, not %q", *era)
	}
	if *wait <= 0 {
		return usage("--wait must be positive")
	}
	tool := pos[0]

	ctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	var held string
	o := mcpclient.Options{URL: *url, Era: mcpclient.Era(*era), Header: http.Header(hdr), Task: *task}
	out, err := mcpclient.Call(ctx, o, tool, argv, func(e mcpclient.Event) {
		switch e.Kind {
		case mcpclient.Held:
			held = oneLine(e.TaskID)
			where := ""
			if e.ConsoleURL != "" {
				where = " or in the console at " + oneLine(e.ConsoleURL)
			}
			fmt.Fprintf(stderr, "held for approval: approve with `%s approvals approve %s`%s\n", cliName(), held, where)
			fmt.Fprintf(stderr, "waiting for the decision (up to %s; Ctrl-C stops waiting, the approval stays pending)…\n", *wait)
		case mcpclient.StillWaiting:
			fmt.Fprintf(stderr, "still undecided (%s); waiting on task %s\n", oneLine(e.Message), oneLine(e.TaskID))
		case mcpclient.Status:
			fmt.Fprintf(stderr, "task %s: %s%s\n", oneLine(e.TaskID), oneLine(e.Status), parens(oneLine(e.Message)))
		}
	})
	if err != nil {
		switch {
		case errors.Is(err, context.DeadlineExceeded) && held != "":
			fmt.Fprintf(stderr, "gave up after %s: task %s is still undecided (see `tollgate approvals show %s`)\n", *wait, held, held)
		case errors.Is(err, context.Canceled) && held != "":
			fmt.Fprintf(stderr, "stopped waiting: task %s is still pending (see `tollgate approvals show %s`)\n", held, held)
		case errors.Is(err, context.DeadlineExceeded):
			fmt.Fprintf(stderr, "no answer within %s\n", *wait)
		case errors.Is(err, context.Canceled):
			fmt.Fprintln(stderr, "interrupted")
		default:
			fmt.Fprintf(stderr, "tollgate call: %s: %s\n", oneLine(*url), oneLine(err.Error()))
		}
		return 1
	}
	if *asJSON {
		printJSONOutcome(stdout, out)
	}
	if out.Err != nil {
		if !*asJSON {
			printError(stderr, oneLine(tool), out.Err)
		}
		return 1
	}
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
		IsError    bool            `json:"isError"`
	}
	_ = json.Unmarshal(out.Result, &res)
	if held != "" && !res.IsError {
		fmt.Fprintf(stderr, "approved: task %s ran\n", held)
	}
	if *asJSON {
		return exitFor(res.IsError)
	}
	w := stdout
	if res.IsError {
		w = stderr
		fmt.Fprintf(stderr, "the tool reported an error:\n")
	}
	// Text content as text; structuredContent as indented JSON (once, when the text only
	// repeats it, as many servers do).
	var structured bytes.Buffer
	if len(res.Structured) > 0 && string(res.Structured) != "null" {
		_ = json.Indent(&structured, res.Structured, "", "  ")
	}
	printed := false
	for _, c := range res.Content {
		switch {
		case c.Type == "text" && structured.Len() > 0 && sameJSON(c.Text, res.Structured):
			continue
		case c.Type == "text":
			text := textBlock(c.Text)
			fmt.Fprint(w, text)
			if !strings.HasSuffix(text, "\n") {
				fmt.Fprintln(w)
			}
		default:
			fmt.Fprintf(w, "[%s content]\n", oneLine(c.Type))
		}
		printed = true
	}
	if structured.Len() > 0 {
		if printed {
			fmt.Fprint(w, "structuredContent: ")
		}
		fmt.Fprintf(w, "%s\n", textBlock(structured.String()))
		printed = true
	}
	if !printed {
		fmt.Fprintf(w, "%s\n", textBlock(string(out.Result)))
	}
	return exitFor(res.IsError)
}

// sameJSON reports whether text is the JSON value raw (whitespace aside).
func sameJSON(text string, raw json.RawMessage) bool {
	var a, b bytes.Buffer
	return json.Compact(&a, []byte(text)) == nil && json.Compact(&b, raw) == nil && bytes.Equal(a.Bytes(), b.Bytes())
}

func exitFor(isError bool) int {
	if isError {
		return 1
	}
	return 0
}

func parens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func printJSONOutcome(w io.Writer, out *mcpclient.Outcome) {
	v := map[string]any{"result": out.Result}
	if out.Err != nil {
		v = map[string]any{"error": out.Err}
	}
	if out.TaskID != "" {
		v["taskId"] = out.TaskID
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintf(w, "%s\n", jsonText(b))
}

// printError says in words how a call ended without a result.
// Everything but the code comes from the server and is printed through oneLine.
func printError(w io.Writer, tool string, e *mcpclient.RPCError) {
	name := e.Name()
	msg := func(prefix string) string { return oneLine(strings.TrimPrefix(e.Message, prefix)) }
	switch name {
	case "PolicyDenied":
		by := "a rule"
		rule := e.DataString("rule")
		if rule != "" {
			by = fmt.Sprintf("rule %q", rule)
		}
		// A Cedar decision names the policies that made it in data.policies, as the API does.
		var data struct {
			Policies []string `json:"policies"`
		}
		if json.Unmarshal(e.Data, &data) == nil && len(data.Policies) > 0 {
			q := make([]string, len(data.Policies))
			for i, id := range data.Policies {
				q[i] = strconv.Quote(id)
			}
			by = fmt.Sprintf("Cedar policy %s under %s", strings.Join(q, ", "), by)
		}
		fmt.Fprintf(w, "denied by %s: %s (%d PolicyDenied); the call never reached the server\n",
			by, msg("PolicyDenied: "), e.Code)
	case "ApprovalRejected":
		fmt.Fprintf(w, "rejected: %s (%d ApprovalRejected); the call did not run\n", msg(name+": "), e.Code)
	case "ApprovalTimedOut":
		fmt.Fprintf(w, "nobody decided in time: %s (%d ApprovalTimedOut); the call did not run\n", msg(name+": "), e.Code)
	case "TaskRequired", "MissingRequiredClientCapability":
		fmt.Fprintf(w, "%s (%d %s): try again with --task\n", msg(""), e.Code, name)
	default:
		if name == "" {
			name = "error"
		}
		fmt.Fprintf(w, "%s failed: %s (%d %s)\n", tool, msg(""), e.Code, oneLine(name))
	}
}
