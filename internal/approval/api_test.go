package approval

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/disclose"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// fixture is a fresh set of tasks in every state the API distinguishes.
func fixture() *fakeTasks {
	approved := pendingTask("tg_c", 20*time.Minute)
	approved.State, approved.Decision = tasks.Approved, &tasks.Decision{Approved: true, By: "alice", Reason: "fine", At: t0}
	rejected := pendingTask("tg_d", 30*time.Minute)
	rejected.State, rejected.Decision = tasks.Rejected, &tasks.Decision{Approved: false, By: "bob", Reason: "no", At: t0}
	accel := pendingTask("tg_e", 40*time.Minute)
	accel.State, accel.Accelerated, accel.Workflow = tasks.Completed, true, ""
	failed := pendingTask("tg_f", 50*time.Minute)
	failed.State, failed.Decision = tasks.Failed, &tasks.Decision{Approved: true, By: "bob", At: t0}
	failed.Error = jsonrpc.NewError(jsonrpc.CodePolicyChanged, "PolicyChanged", "policy changed for "+secretPW)
	timedOut := pendingTask("tg_g", 60*time.Minute)
	timedOut.State = tasks.TimedOut
	gone := pendingTask("tg_h", 2*time.Minute)
	gone.Workflow = "removed_by_reload"
	return newFake(pendingTask("tg_a", 5*time.Minute), pendingTask("tg_b", time.Minute),
		approved, rejected, accel, failed, timedOut, gone)
}

type apiCase struct {
	name       string
	method     string
	path       string
	token      string
	body       string
	setup      func(*fakeTasks)
	wantStatus int
	wantError  string   // error field of an error body
	wantIDs    []string // list order
	check      func(t *testing.T, f *fakeTasks, body []byte, h http.Header)
}

func TestHandler(t *testing.T) {
	tests := []apiCase{
		{name: "no token", method: "GET", path: "/api/v1/approvals", wantStatus: 401, wantError: "unauthorized",
			check: func(t *testing.T, _ *fakeTasks, _ []byte, h http.Header) {
				if got := h.Get("WWW-Authenticate"); got != "Bearer" {
					t.Errorf("WWW-Authenticate = %q", got)
				}
			}},
		{name: "wrong token", method: "GET", path: "/api/v1/approvals", token: "nope", wantStatus: 401, wantError: "unauthorized",
			check: func(t *testing.T, _ *fakeTasks, _ []byte, h http.Header) {
				if got := h.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") || !strings.Contains(got, "invalid_token") {
					t.Errorf("WWW-Authenticate = %q", got)
				}
			}},
		{name: "token on decision needs auth too", method: "POST", path: "/api/v1/approvals/tg_a/approve", wantStatus: 401, wantError: "unauthorized",
			check: func(t *testing.T, f *fakeTasks, _ []byte, _ http.Header) {
				if f.tasks["tg_a"].State != tasks.AwaitingApproval {
					t.Error("unauthenticated approve changed the task")
				}
			}},
		{name: "list default pending, oldest first", method: "GET", path: "/api/v1/approvals", token: aliceToken,
			wantStatus: 200, wantIDs: []string{"tg_a", "tg_h", "tg_b"},
			check: func(t *testing.T, f *fakeTasks, _ []byte, _ http.Header) {
				if !slices.Equal(f.lastQ.States, []tasks.State{tasks.AwaitingApproval}) || f.lastQ.IncludeFinished {
					t.Errorf("manager filter = %+v", f.lastQ)
				}
			}},
		{name: "list all excludes accelerated", method: "GET", path: "/api/v1/approvals?status=all", token: aliceToken,
			wantStatus: 200, wantIDs: []string{"tg_g", "tg_f", "tg_d", "tg_c", "tg_a", "tg_h", "tg_b"}},
		{name: "list approved needs approving decision", method: "GET", path: "/api/v1/approvals?status=approved", token: aliceToken,
			wantStatus: 200, wantIDs: []string{"tg_f", "tg_c"}},
		{name: "list rejected", method: "GET", path: "/api/v1/approvals?status=rejected", token: aliceToken,
			wantStatus: 200, wantIDs: []string{"tg_d"}},
		{name: "list by state name, repeated and comma", method: "GET", path: "/api/v1/approvals?status=timed_out,rejected&status=PENDING", token: aliceToken,
			wantStatus: 200, wantIDs: []string{"tg_g", "tg_d", "tg_a", "tg_h", "tg_b"}},
		{name: "list limit truncates", method: "GET", path: "/api/v1/approvals?limit=2", token: aliceToken,
			wantStatus: 200, wantIDs: []string{"tg_a", "tg_h"},
			check: func(t *testing.T, _ *fakeTasks, b []byte, _ http.Header) {
				var lr ListResponse
				_ = json.Unmarshal(b, &lr)
				if !lr.Truncated {
					t.Error("truncated not set")
				}
			}},
		{name: "list empty is an empty array", method: "GET", path: "/api/v1/approvals?status=cancelled", token: aliceToken,
			wantStatus: 200, wantIDs: []string{},
			check: func(t *testing.T, _ *fakeTasks, b []byte, _ http.Header) {
				if !bytes.Contains(b, []byte(`"approvals":[]`)) {
					t.Errorf("body = %s", b)
				}
			}},
		{name: "list unknown status", method: "GET", path: "/api/v1/approvals?status=bogus", token: aliceToken, wantStatus: 400, wantError: "bad_request"},
		{name: "list bad limit", method: "GET", path: "/api/v1/approvals?limit=0", token: aliceToken, wantStatus: 400, wantError: "bad_request"},
		{name: "list store error", method: "GET", path: "/api/v1/approvals", token: aliceToken,
			setup: func(f *fakeTasks) { f.listErr = errBoom }, wantStatus: 500, wantError: "internal",
			check: func(t *testing.T, _ *fakeTasks, b []byte, _ http.Header) {
				if bytes.Contains(b, []byte("exploded")) {
					t.Errorf("internal error leaked: %s", b)
				}
			}},
		{name: "show redacts and hides owner", method: "GET", path: "/api/v1/approvals/tg_a", token: aliceToken, wantStatus: 200,
			check: func(t *testing.T, _ *fakeTasks, b []byte, _ http.Header) {
				var v map[string]any
				if err := json.Unmarshal(b, &v); err != nil {
					t.Fatal(err)
				}
				want := map[string]any{
					"taskId": "tg_a", "tool": "delete_user", "argsHash": "abc123", "workflow": "default",
					"state": "awaiting_approval", "status": "working", "statusMessage": "Awaiting approval (default)",
					"requestedBy": "carol", "owner": disclose.OwnerHash(sessionID),
					"createdAt": "2026-03-01T11:55:00Z", "approvalDeadline": "2026-03-01T12:05:00Z",
					"expiresAt": "2026-03-01T12:55:00Z",
				}
				for k, w := range want {
					if v[k] != w {
						t.Errorf("%s = %v, want %v", k, v[k], w)
					}
				}
				args, _ := json.Marshal(v["arguments"])
				if string(args) != `{"credentials":{"api_key":"[REDACTED]","region":"eu"},"password":"[REDACTED]","user":"bob"}` {
					t.Errorf("arguments = %s", args)
				}
				if _, ok := v["decision"]; ok {
					t.Error("pending task has a decision")
				}
			}},
		{name: "show failed has failure without message", method: "GET", path: "/api/v1/approvals/tg_f", token: aliceToken, wantStatus: 200,
			check: func(t *testing.T, _ *fakeTasks, b []byte, _ http.Header) {
				var v View
				_ = json.Unmarshal(b, &v)
				if v.Failure == nil || v.Failure.Code != jsonrpc.CodePolicyChanged || v.Failure.Name != "PolicyChanged" || v.Status != "failed" {
					t.Errorf("view = %+v", v)
				}
			}},
		{name: "show unknown workflow fails closed", method: "GET", path: "/api/v1/approvals/tg_h", token: aliceToken, wantStatus: 200,
			check: func(t *testing.T, _ *fakeTasks, b []byte, _ http.Header) {
				var v View
				_ = json.Unmarshal(b, &v)
				if string(v.Arguments) != `"[REDACTED]"` {
					t.Errorf("arguments = %s", v.Arguments)
				}
			}},
		{name: "show unknown", method: "GET", path: "/api/v1/approvals/tg_zzz", token: aliceToken, wantStatus: 404, wantError: "not_found"},
		{name: "approve with reason", method: "POST", path: "/api/v1/approvals/tg_a/approve", token: aliceToken,
			body: `{"reason":"  looks fine  "}`, wantStatus: 200,
			check: func(t *testing.T, f *fakeTasks, b []byte, _ http.Header) {
				var v View
				_ = json.Unmarshal(b, &v)
				if v.Decision == nil || !v.Decision.Approved || v.Decision.By != "alice" || v.Decision.Reason != "looks fine" || v.State != "approved" {
					t.Errorf("view = %+v decision %+v", v, v.Decision)
				}
				if d := f.tasks["tg_a"].Decision; d == nil || d.By != "alice" {
					t.Errorf("stored decision = %+v", d)
				}
			}},
		{name: "approve without body", method: "POST", path: "/api/v1/approvals/tg_a/approve", token: bobToken, wantStatus: 200,
			check: func(t *testing.T, f *fakeTasks, _ []byte, _ http.Header) {
				if d := f.tasks["tg_a"].Decision; d == nil || d.By != "bob" || d.Reason != "" {
					t.Errorf("stored decision = %+v", d)
				}
			}},
		{name: "second decision conflicts with standing one", method: "POST", path: "/api/v1/approvals/tg_c/reject", token: bobToken,
			body: `{"reason":"too late"}`, wantStatus: 409, wantError: "conflict",
			check: func(t *testing.T, f *fakeTasks, b []byte, _ http.Header) {
				var er ErrorResponse
				_ = json.Unmarshal(b, &er)
				if er.Approval == nil || er.Approval.Decision == nil || er.Approval.Decision.By != "alice" || !er.Approval.Decision.Approved {
					t.Errorf("conflict body = %s", b)
				}
				if !strings.Contains(er.Message, "already approved by alice") {
					t.Errorf("message = %q", er.Message)
				}
			}},
		{name: "self approval forbidden", method: "POST", path: "/api/v1/approvals/tg_b/approve", token: carolToken, wantStatus: 403, wantError: "self_approval"},
		// docs/contract.md §4: the reason is optional (`reject ID [--reason R]`).
		{name: "reject without reason", method: "POST", path: "/api/v1/approvals/tg_b/reject", token: aliceToken, wantStatus: 200,
			check: func(t *testing.T, f *fakeTasks, _ []byte, _ http.Header) {
				if f.tasks["tg_b"].State != tasks.Rejected {
					t.Errorf("state %s, want rejected", f.tasks["tg_b"].State)
				}
			}},
		{name: "reject", method: "POST", path: "/api/v1/approvals/tg_b/reject", token: aliceToken, body: `{"reason":"not today"}`, wantStatus: 200,
			check: func(t *testing.T, f *fakeTasks, _ []byte, _ http.Header) {
				if tk := f.tasks["tg_b"]; tk.State != tasks.Rejected || tk.Decision.Reason != "not today" {
					t.Errorf("task = %+v", tk)
				}
			}},
		{name: "reject unknown", method: "POST", path: "/api/v1/approvals/tg_zzz/reject", token: aliceToken, body: `{"reason":"x"}`, wantStatus: 404, wantError: "not_found"},
		{name: "bad JSON", method: "POST", path: "/api/v1/approvals/tg_a/approve", token: aliceToken, body: `{"reason":`, wantStatus: 400, wantError: "bad_request"},
		{name: "unknown field", method: "POST", path: "/api/v1/approvals/tg_a/approve", token: aliceToken, body: `{"reason":"x","approved":false}`, wantStatus: 400, wantError: "bad_request"},
		{name: "trailing data", method: "POST", path: "/api/v1/approvals/tg_a/approve", token: aliceToken, body: `{"reason":"x"}{}`, wantStatus: 400, wantError: "bad_request"},
		{name: "reason not a string", method: "POST", path: "/api/v1/approvals/tg_a/approve", token: aliceToken, body: `{"reason":1}`, wantStatus: 400, wantError: "bad_request"},
		{name: "reason too long", method: "POST", path: "/api/v1/approvals/tg_a/approve", token: aliceToken,
			body: `{"reason":"` + strings.Repeat("r", MaxReasonBytes+1) + `"}`, wantStatus: 400, wantError: "bad_request"},
		{name: "body too large", method: "POST", path: "/api/v1/approvals/tg_a/approve", token: aliceToken,
			body: `{"reason":"` + strings.Repeat("r", MaxBodyBytes) + `"}`, wantStatus: 413, wantError: "request_entity_too_large",
			check: func(t *testing.T, f *fakeTasks, _ []byte, _ http.Header) {
				if f.tasks["tg_a"].State != tasks.AwaitingApproval {
					t.Error("oversized request changed the task")
				}
			}},
		{name: "wrong method", method: "DELETE", path: "/api/v1/approvals/tg_a", token: aliceToken, wantStatus: 405},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := fixture()
			if tc.setup != nil {
				tc.setup(f)
			}
			var logBuf bytes.Buffer
			h := NewHandler(f, testAuth(), Options{Workflow: testWorkflows, Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			body, _ := io.ReadAll(rec.Body)

			if rec.Code != tc.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tc.wantStatus, body)
			}
			if rec.Code != http.StatusMethodNotAllowed {
				if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type = %q", ct)
				}
			}
			if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control = %q", cc)
			}
			if tc.wantError != "" {
				var er ErrorResponse
				if err := json.Unmarshal(body, &er); err != nil || er.Error != tc.wantError || er.Message == "" {
					t.Errorf("error body = %s, want error %q with a message", body, tc.wantError)
				}
			}
			if tc.wantIDs != nil {
				var lr ListResponse
				if err := json.Unmarshal(body, &lr); err != nil {
					t.Fatal(err)
				}
				ids := []string{}
				for _, v := range lr.Approvals {
					ids = append(ids, v.TaskID)
				}
				if !slices.Equal(ids, tc.wantIDs) {
					t.Errorf("ids = %v, want %v", ids, tc.wantIDs)
				}
			}
			for _, secret := range []string{secretPW, sessionID, "7f3c9a1e5b2d4c6a8e0f", aliceToken, bobToken, carolToken} {
				if bytes.Contains(body, []byte(secret)) {
					t.Errorf("response leaks %q: %s", secret, body)
				}
				if strings.Contains(logBuf.String(), secret) {
					t.Errorf("log leaks %q: %s", secret, logBuf.String())
				}
			}
			if tc.check != nil {
				tc.check(t, f, body, rec.Header())
			}
		})
	}
}

func TestHandlerNoWorkflowLookupFailsClosed(t *testing.T) {
	h := NewHandler(fixture(), testAuth(), Options{})
	req := httptest.NewRequest("GET", "/api/v1/approvals/tg_a", nil)
	req.Header.Set("Authorization", "bearer "+aliceToken) // scheme is case-insensitive
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var v View
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil || rec.Code != 200 {
		t.Fatalf("status %d body %s", rec.Code, rec.Body)
	}
	if string(v.Arguments) != `"[REDACTED]"` {
		t.Errorf("arguments = %s", v.Arguments)
	}
}

func TestStaticTokens(t *testing.T) {
	a := StaticTokens(map[string]string{"tok-a": "alice", "tok-b": "bob", "": "nobody", "tok-empty-name": ""})
	tests := []struct {
		token, want string
		ok          bool
	}{
		{"tok-a", "alice", true},
		{"tok-b", "bob", true},
		{"tok-a ", "", false},
		{"tok", "", false},
		{"", "", false},
		{"tok-empty-name", "", false},
		{"TOK-A", "", false},
	}
	for _, tc := range tests {
		name, ok := a.Approver(tc.token)
		if name != tc.want || ok != tc.ok {
			t.Errorf("Approver(%q) = %q, %v; want %q, %v", tc.token, name, ok, tc.want, tc.ok)
		}
	}
	if _, ok := StaticTokens(nil).Approver("x"); ok {
		t.Error("empty authenticator accepted a token")
	}
}
