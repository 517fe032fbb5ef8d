package config

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// totalOnly are the only pools that may lack a per-source share (each says why in Pools).
// Adding a pool here is a decision a reviewer sees, not a way to pass the test.
var totalOnly = []string{
	"Open connections, MCP listener",
	"Open connections, admin listener",
	"Session ids kept in the task store",
	"Slack interactivity callbacks",
	"Slack messages waiting",
	"Caller-token introspection answers",
	"Signing-key refreshes of a caller-auth issuer",
}

// TestPoolsBoundedPerSource walks the bound keys of server.limits and tasks.quotas (every
// max_* key) and fails on one no pool names, on a pool without a per-source share that is
// not on the total-only list, and on a pool without its row (naming its keys) in
// docs/SECURITY.md's limits table.
func TestPoolsBoundedPerSource(t *testing.T) {
	keys := configKeys(reflect.TypeFor[Config](), "")
	named := map[string]bool{}
	names := map[string]bool{}
	for _, p := range Pools {
		names[p.Name] = true
	}
	for _, p := range Pools {
		all := append([]string{p.PerSource, p.Total}, p.Finer...)
		for _, k := range all {
			named[k] = true
			switch {
			case k == "":
			case strings.HasPrefix(k, "fixed: "), strings.HasPrefix(k, "fair: "):
			case strings.HasPrefix(k, "via: "):
				if !names[strings.TrimPrefix(k, "via: ")] {
					t.Errorf("pool %q: %q names no pool", p.Name, k)
				}
			default:
				if !slices.Contains(keys, k) {
					t.Errorf("pool %q: %s is not a config key", p.Name, k)
				}
			}
		}
		if p.Total == "" {
			t.Errorf("pool %q has no total bound", p.Name)
		}
		switch {
		case p.PerSource == "" && p.TotalOnly == "":
			t.Errorf("pool %q has no per-source share and no reason", p.Name)
		case p.PerSource == "" && !slices.Contains(totalOnly, p.Name):
			t.Errorf("pool %q has no per-source share and is not on the accepted total-only list", p.Name)
		case p.PerSource != "" && p.TotalOnly != "":
			t.Errorf("pool %q has a per-source share and says it has none", p.Name)
		}
	}
	for _, k := range keys {
		last := k[strings.LastIndex(k, ".")+1:]
		bound := strings.HasPrefix(k, "server.limits.") || strings.HasPrefix(k, "tasks.quotas.")
		if bound && strings.Contains(last, "max_") && !named[k] {
			t.Errorf("bound %s belongs to no pool in config.Pools", k)
		}
	}

	rows := limitsRows(t)
	for _, p := range Pools {
		var row string
		for _, r := range rows {
			if strings.HasPrefix(r, "| "+p.Name) {
				row = r
				break
			}
		}
		if row == "" {
			t.Errorf("pool %q has no row in docs/SECURITY.md's limits table", p.Name)
			continue
		}
		for _, k := range append([]string{p.PerSource, p.Total}, p.Finer...) {
			if k == "" || strings.Contains(k, ": ") {
				continue
			}
			if last := k[strings.LastIndex(k, ".")+1:]; !strings.Contains(row, last+"`") {
				t.Errorf("docs/SECURITY.md row %q does not name %s", p.Name, k)
			}
		}
	}
}

// limitsRows returns the rows of docs/SECURITY.md's limits table.
func limitsRows(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../docs/SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(data), "\n## Limits\n")
	if !ok {
		t.Fatal("docs/SECURITY.md has no Limits section")
	}
	sec, _, _ = strings.Cut(sec, "\n#")
	var rows []string
	for _, l := range strings.Split(sec, "\n") {
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| What") {
			rows = append(rows, l)
		}
	}
	if len(rows) < 20 {
		t.Fatalf("docs/SECURITY.md limits table not found (%d rows)", len(rows))
	}
	return rows
}
