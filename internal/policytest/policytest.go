// Package policytest runs policy test cases — a caller, a tool, its arguments and annotations,
// and the decision expected — against a configuration's rules and Cedar policies, the way a
// running gateway decides (governance.Snapshot.Evaluate). `tollgate policy test` is its CLI;
// CI runs it on every policy change.
package policytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/rules"
)

// File is one case file. Config, when set, names the configuration the cases run against
// (relative to the case file); `--config` overrides it.
type File struct {
	Config string `yaml:"config"`
	Cases  []Case `yaml:"cases"`
}

// Case is one call and the decision expected for it.
type Case struct {
	Name   string   `yaml:"name"`
	Caller string   `yaml:"caller"` // the verified subject; "" = an anonymous session
	Groups []string `yaml:"groups"`
	Tool   string   `yaml:"tool"`
	// Arguments are the call's arguments (an object); absent = none.
	Arguments map[string]any `yaml:"arguments"`
	// Annotations are the tool's MCP annotation hints as the upstream lists them.
	Annotations map[string]bool `yaml:"annotations"`
	// Time is Cedar's context.time (RFC 3339); absent = now.
	Time   *time.Time `yaml:"time"`
	Expect Expect     `yaml:"expect"`

	line int
}

// Expect is the decision a case expects. Action is required; the rest is checked when given.
type Expect struct {
	Action   config.Action `yaml:"action"`   // forward, approve or deny: what happens to the call
	Would    *string       `yaml:"would"`    // audit mode's would-be action (deny, approve; "" = none)
	Workflow *string       `yaml:"workflow"` // the approval workflow of an approve
	Rule     *string       `yaml:"rule"`     // the matching rule's glob, or "defaults"
	Policies *[]string     `yaml:"policies"` // the Cedar policy ids that decided ([] = none)
}

// Mismatch is one field of a case that differs from what was expected.
type Mismatch struct {
	Field, Want, Got string
}

// Result is one case's outcome.
type Result struct {
	File       string
	Line       int
	Name       string
	Mismatches []Mismatch
}

// Parse reads a case file strictly: unknown keys, a case without tool or expected action, an
// unknown action or annotation are errors naming file and line.
func Parse(name string, src []byte) (*File, error) {
	if isConfig(src) {
		// policies/tests holds a configuration beside its case files, so a glob picks it up.
		return nil, fmt.Errorf("%s: %w", name, ErrConfiguration)
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: no cases", name)
		}
		var te *yaml.TypeError
		if errors.As(err, &te) {
			errs := make([]error, 0, len(te.Errors))
			for _, e := range te.Errors {
				errs = append(errs, fmt.Errorf("%s", tidy(name, e)))
			}
			return nil, errors.Join(errs...)
		}
		return nil, fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	// Line numbers of the cases, from the same document.
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err == nil && len(doc.Content) == 1 {
		m := doc.Content[0]
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == "cases" && m.Content[i+1].Kind == yaml.SequenceNode {
				for j, c := range m.Content[i+1].Content {
					if j < len(f.Cases) {
						f.Cases[j].line = c.Line
					}
				}
			}
		}
	}
	if len(f.Cases) == 0 {
		return nil, fmt.Errorf("%s: no cases", name)
	}
	var errs []error
	for i, c := range f.Cases {
		where := fmt.Sprintf("%s:%d: cases[%d]", name, c.line, i)
		if c.Tool == "" {
			errs = append(errs, fmt.Errorf("%s: tool is required", where))
		}
		switch c.Expect.Action {
		case config.ActionForward, config.ActionApprove, config.ActionDeny:
		case "":
			errs = append(errs, fmt.Errorf("%s: expect.action is required (forward, approve or deny)", where))
		default:
			errs = append(errs, fmt.Errorf("%s: expect.action must be forward, approve or deny, got %q", where, c.Expect.Action))
		}
		if w := c.Expect.Would; w != nil && *w != "" && *w != string(config.ActionDeny) && *w != string(config.ActionApprove) {
			errs = append(errs, fmt.Errorf("%s: expect.would must be deny, approve or \"\", got %q", where, *w))
		}
		for k := range c.Annotations {
			if !slices.Contains(config.AnnotationHints, k) {
				errs = append(errs, fmt.Errorf("%s: annotations: unknown hint %q (want %s)", where, k, strings.Join(config.AnnotationHints, ", ")))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &f, nil
}

// Run decides every case of f with s and compares; name is the file name shown in results.
func Run(s *governance.Snapshot, name string, f *File) []Result {
	log := slog.New(slog.DiscardHandler)
	out := make([]Result, 0, len(f.Cases))
	for i, c := range f.Cases {
		r := Result{File: name, Line: c.line, Name: c.Name}
		if r.Name == "" {
			r.Name = fmt.Sprintf("cases[%d] %s", i, c.Tool)
		}
		args := json.RawMessage(nil)
		if c.Arguments != nil {
			b, err := json.Marshal(c.Arguments)
			if err != nil {
				r.Mismatches = append(r.Mismatches, Mismatch{"arguments", "JSON", err.Error()})
				out = append(out, r)
				continue
			}
			args = b
		}
		var hints rules.Hints
		if len(c.Annotations) > 0 {
			b, _ := json.Marshal(c.Annotations)
			hints = rules.ParseHints(b)
		}
		now := time.Now()
		if c.Time != nil {
			now = *c.Time
		}
		caller := governance.Caller{Subject: c.Caller, Groups: c.Groups}
		if c.Caller == "" {
			caller.SessionID = "policy-test"
		}
		eff := s.EvaluateAt(context.Background(), log, caller, c.Tool, hints, args, now)
		r.Mismatches = compare(c.Expect, eff)
		out = append(out, r)
	}
	return out
}

func compare(want Expect, eff governance.Effective) []Mismatch {
	var m []Mismatch
	add := func(field, w, g string) {
		if w != g {
			m = append(m, Mismatch{field, w, g})
		}
	}
	add("action", string(want.Action), string(eff.Action))
	if want.Would != nil {
		add("would", orNone(*want.Would), orNone(string(eff.Would)))
	}
	if want.Rule != nil {
		add("rule", *want.Rule, governance.RuleName(eff.Decision))
	}
	if want.Workflow != nil {
		got := ""
		if eff.Action == config.ActionApprove || eff.Would == config.ActionApprove {
			got = eff.Decision.Workflow
		}
		add("workflow", orNone(*want.Workflow), orNone(got))
	}
	if want.Policies != nil {
		var got []string
		if eff.Policy != nil {
			got = eff.Policy.PolicyIDs
		}
		w := slices.Clone(*want.Policies)
		slices.Sort(w)
		add("policies", list(w), list(got))
	}
	if len(m) > 0 && eff.Policy != nil {
		// Say why Cedar decided as it did, once, after the fields.
		m = append(m, Mismatch{Field: "cedar", Got: eff.Policy.Reason})
	}
	return m
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func list(ids []string) string {
	if len(ids) == 0 {
		return "[]"
	}
	return "[" + strings.Join(ids, ", ") + "]"
}

// Report writes one line per failing case with its differences, and a last line counting
// them; it returns the number of failing cases.
func Report(w io.Writer, results []Result) int {
	failed := 0
	for _, r := range results {
		if len(r.Mismatches) == 0 {
			continue
		}
		failed++
		fmt.Fprintf(w, "FAIL %s:%d: %s\n", r.File, r.Line, r.Name)
		for _, d := range r.Mismatches {
			if d.Field == "cedar" {
				fmt.Fprintf(w, "    (cedar: %s)\n", d.Got)
				continue
			}
			fmt.Fprintf(w, "    %-9s want %s\n    %-9s got  %s\n", d.Field+":", d.Want, "", d.Got)
		}
	}
	if failed == 0 {
		fmt.Fprintf(w, "ok: %d cases passed\n", len(results))
	} else {
		fmt.Fprintf(w, "%d of %d cases failed\n", failed, len(results))
	}
	return failed
}

// ErrConfiguration: Parse was given a configuration instead of a case file.
var ErrConfiguration = errors.New("a Tollgate configuration, not a case file: name it with a case file's config: key or with --config")

// isConfig reports whether src is a configuration (a mapping with schema: and no cases:).
func isConfig(src []byte) bool {
	var doc yaml.Node
	if yaml.Unmarshal(src, &doc) != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return false
	}
	var schema, cases bool
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		switch m.Content[i].Value {
		case "schema":
			schema = true
		case "cases":
			cases = true
		}
	}
	return schema && !cases
}

var (
	unknownField = regexp.MustCompile(`^line (\d+): field (\S+) not found in type \S+$`)
	lineMsg      = regexp.MustCompile(`^line (\d+): (.*)$`)
)

// tidy turns yaml.v3's "line 4: field colour not found in type policytest.Case" into
// "cases.yaml:4: unknown key "colour"".
func tidy(name, msg string) string {
	if m := unknownField.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%s:%s: unknown key %q", name, m[1], m[2])
	}
	if m := lineMsg.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%s:%s: %s", name, m[1], m[2])
	}
	return name + ": " + msg
}
