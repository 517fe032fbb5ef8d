package approval

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// whoConfig: payments is decided by group finance (alice) only; default by every approver.
func whoConfig(finance ...string) *config.Config {
	return &config.Config{
		Approvers:      []config.Approver{{Name: "alice"}, {Name: "bob"}, {Name: "carol"}},
		ApproverGroups: map[string][]string{"finance": finance},
		Approval: map[string]config.Workflow{
			"default":  {RedactFields: []string{"password"}},
			"payments": {Approvers: []string{"group:finance"}},
			"direct":   {Approvers: []string{"bob"}},
		},
	}
}

func TestMayDecide(t *testing.T) {
	p := PolicyOf(whoConfig("alice"))
	tests := []struct {
		approver string
		wf       config.Workflow
		want     bool
	}{
		{"bob", config.Workflow{}, true}, // no list: every approver (today's behaviour)
		{"", config.Workflow{}, true},
		{"alice", config.Workflow{Approvers: []string{"group:finance"}}, true},
		// A list grants, so a look-alike of a member is not a member (identity: folding only
		// refuses); the old comparison admitted all three.
		{"Alice", config.Workflow{Approvers: []string{"group:finance"}}, false},
		{"ａｌｉｃｅ", config.Workflow{Approvers: []string{"group:finance"}}, false},
		{"alicе", config.Workflow{Approvers: []string{"group:finance"}}, false},
		{"Bob", config.Workflow{Approvers: []string{"alice", "bob"}}, false},
		{"bob", config.Workflow{Approvers: []string{"group:finance"}}, false},
		{"bob", config.Workflow{Approvers: []string{"alice", "bob"}}, true},
		{"bob", config.Workflow{Approvers: []string{"group:sre"}}, false}, // unknown group: nobody
		{"group:finance", config.Workflow{Approvers: []string{"group:finance"}}, false},
		{"", config.Workflow{Approvers: []string{"group:finance"}}, false},
		{"bob", config.Workflow{Approvers: []string{}}, false},
	}
	for _, tt := range tests {
		if got := p.MayDecide(tt.approver, tt.wf); got != tt.want {
			t.Errorf("MayDecide(%q, %v) = %v, want %v", tt.approver, tt.wf.Approvers, got, tt.want)
		}
	}
}

func TestAuthorizeTask(t *testing.T) {
	a := Authorizer{Config: func() *config.Config { return whoConfig("alice") }}
	task := func(wf string, mod func(*tasks.Task)) *tasks.Task {
		tk := pendingTask("tg_x", time.Minute)
		tk.Workflow = wf
		if mod != nil {
			mod(tk)
		}
		return tk
	}
	tests := []struct {
		name     string
		approver string
		t        *tasks.Task
		wantErr  string
	}{
		{"no list", "bob", task("default", nil), ""},
		{"in group", "alice", task("payments", nil), ""},
		{"outside", "bob", task("payments", nil), "approver bob is not in approval.payments.approvers"},
		{"listed by name", "bob", task("direct", nil), ""},
		{"not listed", "alice", task("direct", nil), "approver alice is not in approval.direct.approvers"},
		{"workflow removed", "alice", task("gone", nil), "approval workflow gone is no longer configured"},
		{"accelerated", "bob", task("payments", func(t *tasks.Task) { t.Accelerated = true }), ""},
		{"no workflow", "bob", task("", nil), ""},
	}
	for _, tt := range tests {
		err := a.Authorize(tt.approver, tt.t)
		var na *NotAuthorizedError
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantErr != "" && (!errors.As(err, &na) || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
		}
	}
	if err := (Authorizer{}).Authorize("bob", task("payments", nil)); err != nil {
		t.Errorf("no config: %v", err)
	}
}

// whoFixture: oldest first p1, d1, p2, d2, p3 — payments tasks between bob's, so a filter
// applied after the page was cut would leave bob short or empty pages and wrong cursors.
func whoFixture() *fakeTasks {
	var ts []*tasks.Task
	for i, id := range []string{"tg_p1", "tg_d1", "tg_p2", "tg_d2", "tg_p3"} {
		tk := pendingTask(id, time.Duration(10-i)*time.Minute)
		if strings.HasPrefix(id, "tg_p") {
			tk.Workflow, tk.Tool = "payments", "transfer_funds"
		}
		ts = append(ts, tk)
	}
	return newFake(ts...)
}

type whoAPI struct {
	h   http.Handler
	cfg atomic.Pointer[config.Config]
}

func newWhoAPI(f *fakeTasks) *whoAPI {
	a := &whoAPI{}
	a.cfg.Store(whoConfig("alice"))
	a.h = NewHandler(f, testAuth(), Options{
		Workflow: func(n string) (config.Workflow, bool) { return a.cfg.Load().WorkflowFor(n) },
		Config:   a.cfg.Load,
	})
	return a
}

func (a *whoAPI) do(t *testing.T, method, path, token string, into any) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, "http://admin.test"+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	if into != nil && rec.Code == 200 {
		if err := json.Unmarshal(rec.Body.Bytes(), into); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return rec.Code, rec.Body.String()
}

// pages follows nextCursor and returns the ids of every page.
func (a *whoAPI) pages(t *testing.T, token, query string) [][]string {
	t.Helper()
	var out [][]string
	cur := ""
	for range 10 {
		var lr ListResponse
		path := "/api/v1/approvals?" + query
		if cur != "" {
			path += "&cursor=" + url.QueryEscape(cur)
		}
		if st, body := a.do(t, "GET", path, token, &lr); st != 200 {
			t.Fatalf("list: %d %s", st, body)
		}
		var ids []string
		for _, v := range lr.Approvals {
			ids = append(ids, v.TaskID)
		}
		out = append(out, ids)
		if lr.NextCursor == "" {
			if lr.Truncated {
				t.Error("truncated without a cursor")
			}
			return out
		}
		cur = lr.NextCursor
	}
	t.Fatal("more than 10 pages")
	return nil
}

// TestWhoMayDecideAPI: an approver outside a workflow's approvers list does not see its tasks
// in the list (filtered before paging, cursors intact) or the summary, gets 403 not_authorized
// on show, approve and reject, and the task stays pending; one inside decides it.
func TestWhoMayDecideAPI(t *testing.T) {
	f := whoFixture()
	a := newWhoAPI(f)

	if got := a.pages(t, bobToken, "limit=1"); !slices.EqualFunc(got, [][]string{{"tg_d1"}, {"tg_d2"}}, slices.Equal) {
		t.Errorf("bob's pages = %v, want [[tg_d1] [tg_d2]]", got)
	}
	if got := a.pages(t, bobToken, "limit=2&status=all&sort=newest"); !slices.EqualFunc(got, [][]string{{"tg_d2", "tg_d1"}}, slices.Equal) {
		t.Errorf("bob's pages (all, newest) = %v", got)
	}
	if got := a.pages(t, aliceToken, "limit=2"); !slices.EqualFunc(got, [][]string{{"tg_p1", "tg_d1"}, {"tg_p2", "tg_d2"}, {"tg_p3"}}, slices.Equal) {
		t.Errorf("alice's pages = %v", got)
	}

	var sum SummaryResponse
	if st, body := a.do(t, "GET", "/api/v1/approvals/summary", bobToken, &sum); st != 200 || sum.Pending != 2 ||
		len(sum.Workflows.Top) != 1 || sum.Workflows.Top[0].Key != "default" || len(sum.Tools.Top) != 1 || sum.Tools.Top[0].Key != "delete_user" {
		t.Errorf("bob's summary: %d %s", st, body)
	}
	if _, body := a.do(t, "GET", "/api/v1/approvals/summary", aliceToken, &sum); sum.Pending != 5 {
		t.Errorf("alice's summary: %s", body)
	}

	for _, op := range []struct{ method, path string }{
		{"GET", "/api/v1/approvals/tg_p1"},
		{"POST", "/api/v1/approvals/tg_p1/approve"},
		{"POST", "/api/v1/approvals/tg_p1/reject"},
	} {
		st, body := a.do(t, op.method, op.path, bobToken, nil)
		var er ErrorResponse
		_ = json.Unmarshal([]byte(body), &er)
		if st != 403 || er.Error != "not_authorized" || er.Message != "approver bob is not in approval.payments.approvers" || er.Approval != nil {
			t.Errorf("bob %s %s: %d %s", op.method, op.path, st, body)
		}
		if strings.Contains(body, "transfer_funds") || strings.Contains(body, secretPW) {
			t.Errorf("bob %s %s: the refusal discloses the call: %s", op.method, op.path, body)
		}
	}
	if tk, _ := f.Lookup(t.Context(), "tg_p1"); tk.State != tasks.AwaitingApproval || tk.Decision != nil {
		t.Fatalf("tg_p1 after bob's refused decisions: %s %+v", tk.State, tk.Decision)
	}
	// Unknown ids stay 404, not 403.
	if st, _ := a.do(t, "GET", "/api/v1/approvals/tg_nope", bobToken, nil); st != 404 {
		t.Errorf("unknown id: %d", st)
	}
	// bob still decides what no list restricts.
	if st, body := a.do(t, "POST", "/api/v1/approvals/tg_d1/approve", bobToken, nil); st != 200 {
		t.Errorf("bob approves tg_d1: %d %s", st, body)
	}
	var v View
	if st, body := a.do(t, "POST", "/api/v1/approvals/tg_p1/approve", aliceToken, &v); st != 200 || v.Decision == nil || v.Decision.By != "alice" {
		t.Errorf("alice approves tg_p1: %d %s", st, body)
	}

	// A reload that narrows the list applies to pending tasks at once.
	a.cfg.Store(whoConfig("bob"))
	if st, body := a.do(t, "GET", "/api/v1/approvals/tg_p2", aliceToken, nil); st != 403 || !strings.Contains(body, "approver alice is not in approval.payments.approvers") {
		t.Errorf("alice after the reload: %d %s", st, body)
	}
	if got := a.pages(t, aliceToken, ""); !slices.EqualFunc(got, [][]string{{"tg_d2"}}, slices.Equal) {
		t.Errorf("alice's list after the reload = %v", got)
	}
	if st, body := a.do(t, "POST", "/api/v1/approvals/tg_p2/reject", bobToken, nil); st != 200 {
		t.Errorf("bob rejects tg_p2 after the reload: %d %s", st, body)
	}
	// A workflow a reload removed: nobody (its list is unknown).
	cfg := whoConfig("bob")
	delete(cfg.Approval, "payments")
	a.cfg.Store(cfg)
	if st, body := a.do(t, "POST", "/api/v1/approvals/tg_p3/approve", bobToken, nil); st != 403 || !strings.Contains(body, "no longer configured") {
		t.Errorf("removed workflow: %d %s", st, body)
	}
}

// BenchmarkAuthorizeList is the cost the list and summary add per pending task: 10000 tasks
// over three workflows, per workflow cached (For) and uncached (Authorize on each).
func BenchmarkAuthorizeList(b *testing.B) {
	p := PolicyOf(whoConfig("alice", "dave", "erin"))
	wfs := []string{"default", "payments", "direct"}
	ts := make([]*tasks.Task, 10000)
	for i := range ts {
		ts[i] = &tasks.Task{ID: "tg_x", Workflow: wfs[i%len(wfs)]}
	}
	b.Run("For", func(b *testing.B) {
		for b.Loop() {
			may := p.For("Erin")
			for _, t := range ts {
				may(t)
			}
		}
	})
	b.Run("Authorize", func(b *testing.B) {
		for b.Loop() {
			for _, t := range ts {
				_ = p.Authorize("Erin", t)
			}
		}
	})
}

// TestDecisionsOnlyOfDecidableWorkflows: GET /api/v1/decisions shows a hold only to approvers
// who may decide its workflow, as the approvals list does; decisions of no workflow (denials,
// forwards) are shown to every approver. Fails on the first version of the endpoint, which
// showed every hold to every approver.
func TestDecisionsOnlyOfDecidableWorkflows(t *testing.T) {
	cfg := whoConfig("alice")
	decisions := []map[string]string{{"tool": "transfer_x", "workflow": "payments"}, {"tool": "drop_x"}, {"tool": "delete_x", "workflow": "default"}}
	h := NewHandler(newFake(), testAuth(), Options{Config: func() *config.Config { return cfg },
		Decisions: func(_ bool, _ int, visible func(string) bool) any {
			var out []map[string]string
			for _, d := range decisions {
				if visible(d["workflow"]) {
					out = append(out, d)
				}
			}
			return out
		}})
	tools := func(token string) string {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/decisions", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var resp struct {
			Decisions []map[string]string `json:"decisions"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		var names []string
		for _, d := range resp.Decisions {
			names = append(names, d["tool"])
		}
		return strings.Join(names, ",")
	}
	if got := tools(aliceToken); got != "transfer_x,drop_x,delete_x" {
		t.Errorf("alice (finance) sees %q", got)
	}
	if got := tools(bobToken); got != "drop_x,delete_x" {
		t.Errorf("bob (outside payments) sees %q, want no payments hold", got)
	}
}

// TestAuthorizePins: governance.pins.workflow's approvers decide pins, matched exactly (a
// look-alike of a member is refused); without the key the default workflow's list applies; a
// workflow a reload removed admits nobody.
func TestAuthorizePins(t *testing.T) {
	with := func(wf string) *config.Config {
		c := whoConfig("alice")
		c.Governance.Pins.Workflow = wf
		return c
	}
	tests := []struct {
		name, wf, approver string
		groups             []string
		wantErr            string
	}{
		{"default without a list", "", "bob", nil, ""},
		{"member by group", "payments", "alice", nil, ""},
		{"outside", "payments", "bob", nil, "approver bob is not in approval.payments.approvers (governance.pins.workflow)"},
		{"look-alike of a member", "payments", "Alice", nil, "not in approval.payments.approvers"},
		{"confusable of a member", "payments", "alicе", nil, "not in approval.payments.approvers"},
		{"proxy group", "payments", "carol", []string{"finance"}, ""},
		{"proxy group look-alike", "payments", "carol", []string{"Finance"}, "not in approval.payments.approvers"},
		{"listed by name", "direct", "bob", nil, ""},
		{"removed workflow", "gone", "alice", nil, "no longer configured"},
	}
	for _, tt := range tests {
		err := PolicyOf(with(tt.wf)).WithGroups(tt.groups).AuthorizePins(tt.approver)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: %v, want %q", tt.name, err, tt.wantErr)
		}
	}
	if err := PolicyOf(nil).AuthorizePins("anyone"); err != nil {
		t.Errorf("no config: %v", err)
	}
}
