package execution

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestExecuteUpstreamStatus: how an approved call's upstream answer under an HTTP error status
// becomes the task's failure. A 404 to a request carrying the session id means the session
// ended (spec 2025-11-25 transports, session management), whatever its body says: SDKs answer
// it as plain text or as a JSON-RPC error with id null, and both are SessionGone. Other statuses
// keep the upstream's own JSON-RPC error, or get UpstreamHTTPError without one.
func TestExecuteUpstreamStatus(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		ctype    string
		body     string
		wantCode int
		wantName string
	}{
		{"404 plain text", http.StatusNotFound, "text/plain", "Invalid session ID\n", jsonrpc.CodeUpstreamUnreachable, "SessionGone"},
		{"404 JSON-RPC error, id null", http.StatusNotFound, "application/json",
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Session not found"}}`, jsonrpc.CodeUpstreamUnreachable, "SessionGone"},
		{"500 JSON-RPC error passes on", http.StatusInternalServerError, "application/json",
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"boom"}}`, -32603, ""},
		{"400 plain text", http.StatusBadRequest, "text/plain", "bad\n", jsonrpc.CodeUpstreamUnreachable, "UpstreamHTTPError"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			uc, err := upstream.New(srv.URL+"/mcp", upstream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := New(Options{Upstream: uc, Sessions: session.NewRegistry(0, nil)})
			res, e := r.Execute(context.Background(), &tasks.Task{ID: "tg_1", Tool: "delete_user", SessionID: "up-session-1", Headers: http.Header{}})
			if res != nil || e == nil {
				t.Fatalf("Execute = %s, %v; want a failure", res, e)
			}
			name, _ := e.Data["error"].(string)
			if e.Code != tc.wantCode || name != tc.wantName {
				t.Errorf("failure = %d %q (%s), want %d %q", e.Code, name, e.Message, tc.wantCode, tc.wantName)
			}
		})
	}
}
