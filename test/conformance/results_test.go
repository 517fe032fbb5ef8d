package conformance

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		checks []check
		want   outcome
		nFail  int
	}{
		{"all success", []check{{ID: "a", Status: "SUCCESS"}, {ID: "b", Status: "SUCCESS"}}, pass, 0},
		{"warning counts as pass", []check{{ID: "a", Status: "WARNING"}}, pass, 0},
		{"one failure", []check{{ID: "a", Status: "SUCCESS"}, {ID: "b", Status: "FAILURE", ErrorMessage: "boom"}}, fail, 1},
		{"error is failure", []check{{ID: "a", Status: "ERROR"}}, fail, 1},
		{"info only", []check{{ID: "a", Status: "INFO"}, {ID: "b", Status: "SKIPPED"}}, noCheck, 0},
		{"empty", nil, noCheck, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := classify(tt.checks)
			if got.outcome != tt.want || len(got.failures) != tt.nFail {
				t.Errorf("classify = %+v, want %s with %d failures", got, tt.want, tt.nFail)
			}
		})
	}
}

func TestReadResults(t *testing.T) {
	dir := t.TempDir()
	write := func(sub, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		if body != "" {
			if err := os.WriteFile(filepath.Join(dir, sub, "checks.json"), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("server-tools-call-with-logging-2026-11-22T01-24-15-589Z", `[{"id":"x","status":"FAILURE","errorMessage":"got 2"}]`)
	write("server-ping-2026-11-22T01-24-15-514Z", `[{"id":"ping","status":"SUCCESS"}]`)
	write("server-server-sse-polling-2026-11-22T01-24-25-170Z", `[{"id":"req","status":"INFO"}]`)
	write("server-crashed-2026-11-22T01-24-25-170Z", "")
	write("not-a-result", `[]`)

	got, err := readResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]outcome{
		"tools-call-with-logging": fail,
		"ping":                    pass,
		"server-sse-polling":      noCheck,
		"crashed":                 missing,
	}
	if len(got) != len(want) {
		t.Errorf("got %d scenarios %v, want %d", len(got), got, len(want))
	}
	for name, o := range want {
		if got[name].outcome != o {
			t.Errorf("%s = %s, want %s", name, got[name].outcome, o)
		}
	}

	if res, err := readResults(filepath.Join(dir, "absent")); err != nil || len(res) != 0 {
		t.Errorf("absent dir: %v %v, want empty and no error", res, err)
	}
	write("server-bad-2026-11-22T01-24-25-170Z", `{not json`)
	if _, err := readResults(dir); err == nil {
		t.Error("want error for malformed checks.json")
	}
}

func TestRenderTableMarksRegressions(t *testing.T) {
	direct := map[string]scenarioResult{
		"ping":       {outcome: pass, attempts: 1},
		"dns":        {outcome: pass, attempts: 1},
		"json-2020":  {outcome: fail, attempts: 3, failures: []string{"tool: not found"}},
		"sse-poll":   {outcome: noCheck, attempts: 1},
		"only-there": {outcome: pass, attempts: 1},
		"flaky":      {outcome: pass, attempts: 2},
	}
	through := map[string]scenarioResult{
		"ping":      {outcome: pass, attempts: 2},
		"dns":       {outcome: fail, attempts: 3, failures: []string{"host: got 200 | want 403"}},
		"json-2020": {outcome: fail, attempts: 1},
		"sse-poll":  {outcome: noCheck, attempts: 1},
		"flaky":     {outcome: fail, attempts: 3, failures: []string{"log: got 2"}},
	}
	table := renderTable(direct, through, map[string]string{"flaky": "upstream flaky"}, "http://127.0.0.1:1/mcp")
	for _, want := range []string{
		"| dns | pass | FAIL (attempt 3) | REGRESSION: host: got 200 \\| want 403 |",
		"| ping | pass | pass (attempt 2) |  |",
		"| json-2020 | FAIL (attempt 3) | FAIL | fails directly: tool: not found |",
		"| only-there | pass | missing | REGRESSION:  |",
		"| flaky | pass (attempt 2) | FAIL (attempt 3) | not gating (upstream flaky): log: got 2 |",
		"1 of 6 scenarios pass; 2 regressions",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestServerScenarios(t *testing.T) {
	list := []byte(`Server scenarios (test against a server):
  - server-initialize [2025-06-18,2025-11-25]
  - server-stateless [2026-07-28]
  - tasks-lifecycle [extension]
  - tools-list [2025-06-18,2025-11-25,2026-07-28]
  - tasks-mrtr-input [extension]

Client scenarios (test against a client):
  - tasks-client-only [extension]
  - server-stateless-client [2026-07-28]
`)
	got := serverScenarios(list, func(n string) bool { return n == "server-stateless" || strings.HasPrefix(n, "tasks-") })
	want := []string{"server-stateless", "tasks-lifecycle", "tasks-mrtr-input"}
	if !slices.Equal(got, want) {
		t.Errorf("serverScenarios = %v, want %v", got, want)
	}
}

func TestJudge(t *testing.T) {
	failing := expectation{direct: pass, through: fail, why: "no era", match: "-32022"}
	passing := expectation{direct: pass, through: pass}
	ok := scenarioResult{outcome: pass}
	refused := scenarioResult{outcome: fail, failures: []string{"x: got -32022"}}
	other := scenarioResult{outcome: fail, failures: []string{"x: got -32601"}}
	tests := []struct {
		name  string
		exp   expectation
		d, tg scenarioResult
		want  string // substring of the problem; "" = no problem
	}{
		{"expected failure for the listed reason", failing, ok, refused, ""},
		{"expected pass", passing, ok, ok, ""},
		{"expected failure now passes", failing, ok, ok, "now passes through Tollgate"},
		{"fails for another reason", failing, ok, other, "not for the listed reason"},
		{"regression", passing, ok, other, "REGRESSION"},
		{"direct baseline broke", passing, other, ok, "directly FAIL"},
		{"crash instead of failure", failing, ok, scenarioResult{outcome: missing}, "through Tollgate missing, want FAIL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := judge(tt.exp, tt.d, tt.tg)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("judge = %q, want %q", got, tt.want)
			}
		})
	}
}
