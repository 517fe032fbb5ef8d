package approval

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

const pinsUsage = `usage: tollgate pins <command> [flags]

Pinned tool definitions (governance.pins): tools whose definition changed wait here for an
approver. Uses TOLLGATE_ADMIN_URL and TOLLGATE_ADMIN_TOKEN as tollgate approvals does.

commands:
  list [--json]                  the tools awaiting a decision, with what changed
  accept TOOL [--digest D]       accept the awaiting definition (D: as listed; default: the
                                 one listed now, shown before it is accepted)
  reject TOOL [--digest D]       keep the accepted definition; the new one stays refused
  export                         print the pin file of the accepted definitions
                                 (tollgate pins export > pins.json; governance.pins.file)
`

// pinReview is one entry of GET /api/v1/pins (package pins Review).
type pinReview struct {
	Tool           string `json:"tool"`
	Status         string `json:"status"`
	Reason         string `json:"reason"`
	AcceptedDigest string `json:"accepted_digest"`
	Digest         string `json:"digest"`
	Changes        int    `json:"changes"`
	Diff           []struct {
		Field string   `json:"field"`
		Lines []string `json:"lines"`
	} `json:"diff"`
}

// RunPinsCLI runs `tollgate pins`; exit codes as RunCLI.
func RunPinsCLI(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, pinsUsage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	if cmd == "help" || cmd == "-h" || cmd == "--help" {
		fmt.Fprint(stdout, pinsUsage)
		return exitOK
	}
	fs := flag.NewFlagSet("tollgate pins "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	digest := fs.String("digest", "", "definition digest")
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		return usageError(stderr, err.Error())
	}
	switch cmd {
	case "list", "export":
		if len(pos) != 0 {
			return usageError(stderr, fmt.Sprintf("%s takes no arguments", cmd))
		}
	case "accept", "reject":
		if len(pos) != 1 || pos[0] == "" || strings.ContainsAny(pos[0], "/?#") {
			return usageError(stderr, cmd+" needs exactly one tool name")
		}
	default:
		return usageError(stderr, fmt.Sprintf("unknown command %q", cmd))
	}
	c, err := newClient(getenv)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "error:", sanitize(err.Error()))
		return exitError
	}
	switch cmd {
	case "export":
		body, err := c.do(ctx, http.MethodGet, "/api/v1/pins/export", nil)
		if err != nil {
			return fail(err)
		}
		writeRaw(stdout, body)
		return exitOK
	case "list":
		body, err := c.do(ctx, http.MethodGet, "/api/v1/pins", nil)
		if err != nil {
			return fail(err)
		}
		if *asJSON {
			writeRaw(stdout, body)
			return exitOK
		}
		var r struct {
			Pins []pinReview `json:"pins"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			return fail(fmt.Errorf("unexpected response from admin API: %w", err))
		}
		if len(r.Pins) == 0 {
			fmt.Fprintln(stdout, "no tool awaits a decision")
		}
		for _, p := range r.Pins {
			printReview(stdout, p)
		}
		return exitOK
	}
	tool := pos[0]
	if *digest == "" {
		body, err := c.do(ctx, http.MethodGet, "/api/v1/pins", nil)
		if err != nil {
			return fail(err)
		}
		var r struct {
			Pins []pinReview `json:"pins"`
		}
		_ = json.Unmarshal(body, &r)
		for _, p := range r.Pins {
			if p.Tool == tool && p.Status == "quarantined" {
				printReview(stdout, p) // the approver sees what is decided
				*digest = p.Digest
			}
		}
		if *digest == "" {
			return fail(fmt.Errorf("no definition of tool %q awaits a decision", tool))
		}
	}
	req, _ := json.Marshal(map[string]string{"digest": *digest})
	body, err := c.do(ctx, http.MethodPost, "/api/v1/pins/"+url.PathEscape(tool)+"/"+cmd, req)
	if err != nil {
		return fail(err)
	}
	if *asJSON {
		writeRaw(stdout, body)
		return exitOK
	}
	fmt.Fprintf(stdout, "%s %s (%s)\n", map[string]string{"accept": "accepted", "reject": "rejected"}[cmd], sanitize(tool), sanitize(*digest))
	return exitOK
}

func printReview(w io.Writer, p pinReview) {
	fmt.Fprintf(w, "%s: %s (%s, %d change(s))\n  accepted %s\n  new      %s\n", sanitize(p.Tool), sanitize(p.Status),
		sanitize(p.Reason), p.Changes, orDash(p.AcceptedDigest), sanitize(p.Digest))
	for _, d := range p.Diff {
		fmt.Fprintf(w, "  --- %s\n", sanitize(d.Field))
		for _, l := range d.Lines {
			fmt.Fprintf(w, "  %s\n", sanitize(l))
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return sanitize(s)
}
