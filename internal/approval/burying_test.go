package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/disclose"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// buryFixture is the real task manager (memory store) holding `flood` pending approvals of
// one owner, then one of another owner (the victim) with a shorter approval timeout, and the
// approvals API in front of it on loopback.
type buryFixture struct {
	m        *tasks.Manager
	srv      *httptest.Server
	flood    []string
	victim   string
	attacker string // owner key (hash) of the flood
	owner    string // owner key of the victim
	create   func(owner, tool, workflow string) *tasks.Task
}

func newBuryFixture(t *testing.T, ctx context.Context, flood int) *buryFixture {
	t.Helper()
	var tick atomic.Int64 // every reading of the clock is 1 ms later: creation order is total
	now := func() time.Time { return t0.Add(time.Duration(tick.Add(1)) * time.Millisecond) }
	workflows := func(name string) (config.Workflow, bool) {
		switch name {
		case "default":
			return config.Workflow{Timeout: config.Duration(10 * time.Minute)}, true
		case "urgent":
			return config.Workflow{Timeout: config.Duration(time.Minute)}, true
		}
		return config.Workflow{}, false
	}
	m := tasks.NewManager(store.NewMemory(), okExec{}, nil, tasks.Options{Workflow: workflows, Now: now,
		Quotas: config.Quotas{MaxPendingPerOwner: 10000, MaxPendingTotal: 10000}})
	t.Cleanup(func() { m.Close() })
	f := &buryFixture{m: m, attacker: disclose.OwnerHash("session:flooder"), owner: disclose.OwnerHash("session:victim")}
	f.create = func(owner, tool, workflow string) *tasks.Task {
		t.Helper()
		tk, err := m.Create(ctx, tasks.CreateRequest{Owner: owner, RequestedBy: "carol", Tool: tool,
			Arguments: json.RawMessage(`{"n":` + strings.Repeat("1", 1+len(f.flood)%7) + `}`), Workflow: workflow})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		return tk
	}
	for range flood {
		f.flood = append(f.flood, f.create("session:flooder", "delete_user", "default").ID)
	}
	f.victim = f.create("session:victim", "drop_table", "urgent").ID
	f.srv = httptest.NewServer(NewHandler(m, testAuth(), Options{Workflow: workflows}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *buryFixture) get(t *testing.T, ctx context.Context, path string, into any) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 && into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, b)
		}
	}
	return resp.StatusCode
}

// listPage is the part of ListResponse the tests read (its own type, so the tests also build
// against the API before cursors, to show that they fail there).
type listPage struct {
	Approvals  []View `json:"approvals"`
	NextCursor string `json:"nextCursor"`
}

// follow reads every page of path (a query without cursor) and returns the ids in order.
func (f *buryFixture) follow(t *testing.T, ctx context.Context, path string, between func(page int)) []string {
	t.Helper()
	var ids []string
	cur := ""
	for page := 0; ; page++ {
		p := path
		if cur != "" {
			p += "&cursor=" + url.QueryEscape(cur)
		}
		var lr listPage
		if st := f.get(t, ctx, p, &lr); st != 200 {
			t.Fatalf("GET %s: HTTP %d", p, st)
		}
		for _, v := range lr.Approvals {
			ids = append(ids, v.TaskID)
		}
		if lr.NextCursor == "" || page > 100 {
			return ids
		}
		if between != nil {
			between(page)
		}
		cur = lr.NextCursor
	}
}

// TestNoBurying: 150 pending approvals of one caller used to hide a later request of another
// caller from the console (100 shown), and 1000 from the API and the CLI: the list was
// oldest-first with no cursor. Now the other request is reachable on the first page newest
// first, soonest deadline first, by owner, by tool, by following cursors, in the per-owner
// counts, and through the CLI.
func TestNoBurying(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := newBuryFixture(t, ctx, 150)

	firstPage := func(query string) []string {
		t.Helper()
		var lr listPage
		if st := f.get(t, ctx, "/api/v1/approvals?"+query, &lr); st != 200 {
			t.Fatalf("%s: HTTP %d", query, st)
		}
		var ids []string
		for _, v := range lr.Approvals {
			ids = append(ids, v.TaskID)
		}
		return ids
	}
	for _, q := range []string{"sort=newest", "sort=expiry", "owner=" + f.owner, "tool=drop_*", "workflow=urgent", "sort=newest&limit=1"} {
		if ids := firstPage(q); !slices.Contains(ids, f.victim) {
			t.Errorf("?%s: the victim's request is not on the first page (%d shown)", q, len(ids))
		}
	}
	if ids := firstPage("sort=newest&limit=1"); len(ids) != 1 || ids[0] != f.victim {
		t.Errorf("sort=newest&limit=1 = %v, want only the victim's %s", ids, f.victim)
	}
	if ids := firstPage("owner=" + f.owner); len(ids) != 1 {
		t.Errorf("owner filter returned %d approvals, want 1", len(ids))
	}

	// Following cursors reaches every request exactly once, in order, in every sort.
	want := append(slices.Clone(f.flood), f.victim)
	for _, sort := range []string{"oldest", "newest", "expiry"} {
		got := f.follow(t, ctx, "/api/v1/approvals?limit=40&sort="+sort, nil)
		exp := slices.Clone(want)
		switch sort {
		case "newest":
			slices.Reverse(exp)
		case "expiry": // the victim's deadline (1m) comes first, then the flood in creation order
			exp = append([]string{f.victim}, f.flood...)
		}
		if !slices.Equal(got, exp) {
			t.Errorf("sort=%s: following cursors gave %d ids (victim included: %v), want all %d in order",
				sort, len(got), slices.Contains(got, f.victim), len(exp))
		}
	}

	// Per-owner counts name the victim's owner beside the flood.
	var sum SummaryResponse
	if st := f.get(t, ctx, "/api/v1/approvals/summary", &sum); st != 200 {
		t.Fatalf("summary: HTTP %d", st)
	}
	if sum.Pending != 151 || len(sum.Owners.Top) != 2 || sum.Owners.Top[0] != (Count{Key: f.attacker, Pending: 150, NextDeadline: sum.Owners.Top[0].NextDeadline}) ||
		sum.Owners.Top[1].Key != f.owner || sum.Owners.Top[1].Pending != 1 {
		t.Errorf("summary = %+v", sum)
	}

	// The CLI: the default (newest first) and --all both show the victim's request.
	cli := func(args ...string) string {
		t.Helper()
		env := map[string]string{"TOLLGATE_ADMIN_URL": f.srv.URL, "TOLLGATE_ADMIN_TOKEN": aliceToken}
		var out, errb bytes.Buffer
		if code := RunCLI(ctx, args, &out, &errb, func(k string) string { return env[k] }); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, &errb)
		}
		return out.String()
	}
	if out := cli("list", "--limit", "100"); !strings.Contains(out, f.victim) {
		t.Errorf("approvals list (newest first) lacks the victim's request")
	}
	out := cli("list", "--all", "--sort", "oldest", "--limit", "60")
	if !strings.Contains(out, f.victim) || strings.Count(out, "tg_") != 151 {
		t.Errorf("approvals list --all: victim shown %v, %d rows, want 151", strings.Contains(out, f.victim), strings.Count(out, "tg_"))
	}
	if out := cli("summary"); !strings.Contains(out, f.owner) || !strings.Contains(out, "151") {
		t.Errorf("approvals summary:\n%s", out)
	}
}

// TestCursorStableWhileTasksChange: tasks created and decided between two pages neither repeat
// nor skip the others (the cursor is a position, not an offset).
func TestCursorStableWhileTasksChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := newBuryFixture(t, ctx, 30)
	for _, sort := range []string{"oldest", "newest", "expiry"} {
		before := f.follow(t, ctx, "/api/v1/approvals?sort="+sort, nil)
		decided := 0
		seen := f.follow(t, ctx, "/api/v1/approvals?limit=7&sort="+sort, func(int) {
			// between pages: one new request, and a decision on one the walk has not reached
			f.create("session:victim", "drop_table", "default")
			decided++
			if _, err := f.m.Approve(ctx, before[len(before)-decided], "alice", ""); err != nil {
				t.Fatal(err)
			}
		})
		counts := map[string]int{}
		for _, id := range seen {
			counts[id]++
			if counts[id] > 1 {
				t.Errorf("sort=%s: %s listed twice", sort, id)
			}
		}
		for _, id := range before[:len(before)-decided] { // pending throughout
			if counts[id] != 1 {
				t.Errorf("sort=%s: %s, pending throughout, was skipped", sort, id)
			}
		}
		if decided < 3 {
			t.Errorf("sort=%s: only %d pages", sort, decided+1)
		}
	}
}

func TestListQueryErrors(t *testing.T) {
	f := fixture()
	srv := httptest.NewServer(NewHandler(f, testAuth(), Options{Workflow: testWorkflows}))
	defer srv.Close()
	newest := cursor{Sort: SortNewest, Key: 1, ID: "tg_a"}.encode()
	for _, tc := range []struct{ query, want string }{
		{"sort=random", `unknown sort "random"`},
		{"sort=newest&sort=oldest", "sort may be given once"},
		{"tool=%5B", "not a valid glob"},
		{"owner=alice", "not an owner hash"},
		{"owner=0123456789abc", "not an owner hash"},
		{"cursor=%21%21", "cursor is not valid"},
		{"cursor=" + cursor{Sort: SortOldest}.encode(), "cursor is not valid"},
		{"cursor=" + newest, "cursor belongs to sort=newest, not sort=oldest"},
		{"workflow=" + strings.Repeat("w", MaxFilterBytes+1), "exceeds 1024 bytes"},
		{"limit=1001", "limit must be"},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/api/v1/approvals?"+tc.query, nil)
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var er ErrorResponse
		_ = json.NewDecoder(resp.Body).Decode(&er)
		resp.Body.Close()
		if resp.StatusCode != 400 || er.Error != "bad_request" || !strings.Contains(er.Message, tc.want) {
			t.Errorf("?%.60s: HTTP %d %+v, want 400 with %q", tc.query, resp.StatusCode, er, tc.want)
		}
	}
	for _, q := range []string{"top=0", "top=101", "top=x", "top=1&top=2"} {
		req, _ := http.NewRequest("GET", srv.URL+"/api/v1/approvals/summary?"+q, nil)
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("summary ?%s: HTTP %d, want 400", q, resp.StatusCode)
		}
	}
}

// TestAnonymousOwnersGrouped: every anonymous 2026-07-28 task is its own owner (package
// tasks); approvers see them as one owner "anonymous", in views, the summary and the filter,
// rather than one unrelated hash per task.
func TestAnonymousOwnersGrouped(t *testing.T) {
	ctx := context.Background()
	f := newBuryFixture(t, ctx, 2)
	for range 3 {
		f.create(tasks.Anonymous, "delete_user", "default")
	}
	var sum SummaryResponse
	if st := f.get(t, ctx, "/api/v1/approvals/summary", &sum); st != 200 {
		t.Fatalf("summary: HTTP %d", st)
	}
	if len(sum.Owners.Top) == 0 || sum.Owners.Top[0].Key != AnonymousOwner || sum.Owners.Top[0].Pending != 3 {
		t.Errorf("summary owners = %+v, want anonymous with 3 first", sum.Owners.Top)
	}
	var page listPage
	if st := f.get(t, ctx, "/api/v1/approvals?owner="+AnonymousOwner, &page); st != 200 || len(page.Approvals) != 3 {
		t.Fatalf("?owner=anonymous: HTTP %d, %d approvals", st, len(page.Approvals))
	}
	for _, v := range page.Approvals {
		if v.Owner != AnonymousOwner {
			t.Errorf("view owner %q", v.Owner)
		}
	}
}
