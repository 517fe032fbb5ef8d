package approval

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// TestMeasureBurying records the figures of docs/SECURITY.md "Burying": N pending approvals
// of one owner, then one of another, and whether (and at what cost) an approver reaches the
// other through the API and the CLI. Run with TOLLGATE_MEASURE_BURYING=1000,10000 (it also
// builds against the API before cursors, to measure "before"); TOLLGATE_MEASURE_STORES=memory
// leaves out the file store.
func TestMeasureBurying(t *testing.T) {
	spec := os.Getenv("TOLLGATE_MEASURE_BURYING")
	if spec == "" {
		t.Skip("set TOLLGATE_MEASURE_BURYING=1000,10000 to measure")
	}
	stores := cmp.Or(os.Getenv("TOLLGATE_MEASURE_STORES"), "memory,file")
	for _, kind := range strings.Split(stores, ",") {
		for _, s := range strings.Split(spec, ",") {
			n, _ := strconv.Atoi(s)
			measureBurying(t, kind, n)
		}
	}
}

func measureBurying(t *testing.T, kind string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var st store.Store = store.NewMemory()
	if kind == "file" {
		f, err := store.OpenFile(filepath.Join(t.TempDir(), "tasks.db"))
		if err != nil {
			t.Fatal(err)
		}
		st = f
	}
	var tick atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(tick.Add(1)) * time.Microsecond) }
	wf := func(string) (config.Workflow, bool) {
		return config.Workflow{Timeout: config.Duration(time.Hour)}, true
	}
	m := tasks.NewManager(st, okExec{}, nil, tasks.Options{Workflow: wf, Now: now,
		Quotas: config.Quotas{MaxPendingPerOwner: 100000, MaxPendingTotal: 100000}})
	defer m.Close()
	args := json.RawMessage(`{"user":"bob","reason":"` + strings.Repeat("x", 100) + `"}`)
	mk := func(owner string, i int) string {
		tk, err := m.Create(ctx, tasks.CreateRequest{Owner: owner, RequestedBy: "carol", Tool: "delete_user",
			Arguments: json.RawMessage(fmt.Sprintf(`{"i":%d,"a":%s}`, i, args)), Workflow: "default"})
		if err != nil {
			t.Fatal(err)
		}
		return tk.ID
	}
	start := time.Now()
	for i := range n {
		mk("session:flooder", i)
	}
	victim := mk("session:victim", -1)
	created := time.Since(start)
	srv := httptest.NewServer(NewHandler(m, testAuth(), Options{Workflow: wf}))
	defer srv.Close()
	get := func(path string) (int, []byte, time.Duration) {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		t0 := time.Now()
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, b, time.Since(t0)
	}
	// walk: pages of a query until the victim shows (or no cursor); pages, time, bytes
	walk := func(query string) string {
		cur, pages, bytesRead, took := "", 0, 0, time.Duration(0)
		for {
			p := "/api/v1/approvals?" + query
			if cur != "" {
				p += "&cursor=" + url.QueryEscape(cur)
			}
			st, b, d := get(p)
			pages, bytesRead, took = pages+1, bytesRead+len(b), took+d
			var lp listPage
			if st != 200 || json.Unmarshal(b, &lp) != nil {
				return fmt.Sprintf("HTTP %d", st)
			}
			if slices.ContainsFunc(lp.Approvals, func(v View) bool { return v.TaskID == victim }) {
				return fmt.Sprintf("reached on page %d (%s, %d KB, %s/page)", pages, took.Round(time.Millisecond), bytesRead>>10, (took / time.Duration(pages)).Round(100*time.Microsecond))
			}
			if lp.NextCursor == "" {
				return fmt.Sprintf("NOT reached: %d pages, no cursor (%d shown)", pages, len(lp.Approvals))
			}
			cur = lp.NextCursor
		}
	}
	t.Logf("%s store, %d pending of one owner + 1 of another (created in %s):", kind, n, created.Round(time.Millisecond))
	for _, q := range []string{"", "limit=1000", "sort=newest", "sort=expiry", "sort=newest&limit=100&owner=" + ownerKey("session:victim")} {
		t.Logf("  API ?%s: %s", q, walk(q))
	}
	code, b, d := get("/api/v1/approvals/summary")
	t.Logf("  API summary: HTTP %d, %d bytes, %s, names the other owner: %v", code, len(b), d.Round(100*time.Microsecond), bytes.Contains(b, []byte(ownerKey("session:victim"))))
	cli := func(args ...string) string {
		env := map[string]string{"TOLLGATE_ADMIN_URL": srv.URL, "TOLLGATE_ADMIN_TOKEN": aliceToken}
		var out, errb bytes.Buffer
		t0 := time.Now()
		code := RunCLI(ctx, args, &out, &errb, func(k string) string { return env[k] })
		return fmt.Sprintf("exit %d, %d rows, other owner's request shown: %v, %s", code, strings.Count(out.String(), "tg_"), strings.Contains(out.String(), victim), time.Since(t0).Round(time.Millisecond))
	}
	t.Logf("  CLI list: %s", cli("list"))
	t.Logf("  CLI list --limit 1000: %s", cli("list", "--limit", "1000"))
	t.Logf("  CLI list --all: %s", cli("list", "--all"))
}
