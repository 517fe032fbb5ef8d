package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// designMetrics are the metric families docs/contract.md §4 names; the dashboard shows each of them.
// Together with opsMetrics they are all it may query, so a renamed metric breaks this test
// rather than a panel.
var designMetrics = map[string]bool{
	"tollgate_tools_by_annotation":          true,
	"tollgate_task_validation_errors_total": true,
	"tollgate_requests_total":               true,
	"tollgate_request_duration_seconds":     true,
	"tollgate_decisions_total":              true,
	"tollgate_tasks":                        true,
	"tollgate_approval_wait_seconds":        true,
	"tollgate_upstream_requests_total":      true,
	"tollgate_config_reloads_total":         true,
}

// opsMetrics are gauges internal/metrics adds beyond docs/contract.md §4, used for the overview.
var opsMetrics = map[string]bool{
	"tollgate_upstream_up":                true,
	"tollgate_config_last_reload_success": true,
}

// holdMetrics are the hold path's metrics (tasks.sync_approval: hold, docs/metrics.md); the
// dashboard shows each of them too.
var holdMetrics = map[string]bool{
	"tollgate_held_calls":                true,
	"tollgate_held_calls_total":          true,
	"tollgate_held_calls_attached_total": true,
	"tollgate_held_calls_settled_total":  true,
	"tollgate_held_calls_replayed_total": true,
	"tollgate_hold_wait_seconds":         true,
}

// boundMetrics are the metrics of bounds that give way instead of refusing (docs/metrics.md);
// the dashboard shows each of them too.
var boundMetrics = map[string]bool{
	"tollgate_upstream_task_bindings":               true,
	"tollgate_upstream_task_bindings_evicted_total": true,
}

// histogramSuffix strips the series suffixes of a histogram family.
var histogramSuffix = regexp.MustCompile(`_(bucket|sum|count)$`)

var metricName = regexp.MustCompile(`\btollgate_[a-z_]+`)

// collectExprs returns every "expr" string anywhere in the dashboard (panels, rows, annotations).
func collectExprs(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if s, ok := val.(string); ok && k == "expr" {
				*out = append(*out, s)
				continue
			}
			collectExprs(val, out)
		}
	case []any:
		for _, val := range x {
			collectExprs(val, out)
		}
	}
}

func TestGrafanaDashboard(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "grafana", "tollgate-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Error("dashboard needs a uid and a title")
	}
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
	}

	var generic any
	if err := json.Unmarshal(data, &generic); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	collectExprs(generic, &exprs)
	if len(exprs) == 0 {
		t.Fatal("no queries in the dashboard")
	}
	shown := map[string]bool{}
	for _, e := range exprs {
		if err := balanced(e); err != "" {
			t.Errorf("query %q: %s", e, err)
		}
		for _, m := range metricName.FindAllString(e, -1) {
			family := m
			if !designMetrics[family] && !holdMetrics[family] && !boundMetrics[family] {
				family = histogramSuffix.ReplaceAllString(m, "")
			}
			if opsMetrics[m] {
				continue
			}
			if !designMetrics[family] && !holdMetrics[family] && !boundMetrics[family] {
				t.Errorf("query %q uses %s, which docs/contract.md §4 does not name", e, m)
				continue
			}
			shown[family] = true
		}
	}
	for _, ms := range []map[string]bool{holdMetrics, boundMetrics} {
		for m := range ms {
			designMetrics[m] = true
		}
	}
	for m := range designMetrics {
		if !shown[m] {
			t.Errorf("metric %s has no panel", m)
		}
	}
}

// balanced is a cheap PromQL sanity check: (), {}, [] and quotes pair up.
func balanced(expr string) string {
	var stack []rune
	pairs := map[rune]rune{')': '(', '}': '{', ']': '['}
	inQuote := false
	for _, r := range expr {
		switch {
		case r == '"':
			inQuote = !inQuote
		case inQuote:
		case strings.ContainsRune("({[", r):
			stack = append(stack, r)
		case strings.ContainsRune(")}]", r):
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return "unbalanced " + string(r)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if inQuote {
		return "unterminated string"
	}
	if len(stack) > 0 {
		return "unclosed " + string(stack)
	}
	return ""
}
