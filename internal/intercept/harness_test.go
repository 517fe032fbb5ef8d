package intercept

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/execution"
	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/gwtools"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// The task manager runs accelerated tasks on goroutines; none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// unitConfig is the governance most unit tests run under: one rule per action, a
// force_required override, and a small max TTL so clamping is easy to provoke. Paths resolve
// against testdata/ (the config is parsed as testdata/unit.yaml).
const unitConfig = `schema: 1
sources:
  - {id: upstream, kind: mcp, url: "http://127.0.0.1:1/mcp"}
governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
    - {match: "drop_*", action: deny}
    - {match: "transfer_*", action: policy, policy_id: financial}
cedar: {policies: [financial.cedar]}
task_annotation_overrides: {force_required: [audit_log, delete_audit]}
tasks: {default_ttl: 10m, max_ttl: 1h, sync_approval: error}
`

// stubUpstream is a loopback MCP endpoint for the paths where the gateway itself talks to the
// upstream (accelerated task execution, tasks/list merge). It records every method it sees so
// tests can prove the upstream was never contacted.
type stubUpstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []string
}

func newStubUpstream(t *testing.T) *stubUpstream {
	t.Helper()
	s := &stubUpstream{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Parse(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.got = append(s.got, m.Method)
		s.mu.Unlock()
		if m.Kind != jsonrpc.KindRequest {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		result := `{}`
		switch m.Method {
		case "tools/call":
			result = `{"content":[{"type":"text","text":"ran"}]}`
		case "tasks/list":
			result = `{"tasks":[{"taskId":"up-1","status":"working","createdAt":"2025-11-25T00:00:00Z","lastUpdatedAt":"2025-11-25T00:00:00Z","ttl":60000}]}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jsonrpc.ResultResponse(m.ID, json.RawMessage(result)))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *stubUpstream) methods() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// logBuffer collects log lines for assertions (e.g. the WARN of a clamped TTL).
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tasksAll lists every task, finished or not.
var tasksAll = tasks.Filter{IncludeFinished: true}

// gwHarness is a Gateway wired as internal/server wires it, minus the listeners.
type gwHarness struct {
	gw     *Gateway
	router *Router
	mgr    *tasks.Manager
	tools  *gwtools.Tools
	up     *stubUpstream
	logs   *logBuffer
	snaps  *governance.Holder
}

func parseUnitConfig(t testing.TB, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), filepath.Join("testdata", "unit.yaml"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

func newHarness(t *testing.T, yaml string) *gwHarness {
	t.Helper()
	up := newStubUpstream(t)
	h := newHarnessWith(t, yaml, up.srv.URL+"/mcp", store.NewMemory())
	h.up = up
	return h
}

// newHarnessOn is newHarness in front of the upstream at url (h.up is nil).
func newHarnessOn(t *testing.T, yaml, url string) *gwHarness {
	t.Helper()
	return newHarnessWith(t, yaml, url, store.NewMemory())
}

// newHarnessStore is newHarness with the task store given (e.g. one that fails).
func newHarnessStore(t *testing.T, yaml string, st store.Store) *gwHarness {
	t.Helper()
	up := newStubUpstream(t)
	h := newHarnessWith(t, yaml, up.srv.URL+"/mcp", st)
	h.up = up
	return h
}

// newHarnessWith is newHarness in front of the upstream at url with the task store st.
func newHarnessWith(t *testing.T, yaml, url string, st store.Store) *gwHarness {
	t.Helper()
	cfg := parseUnitConfig(t, yaml)
	snap, err := governance.Build(cfg, nil)
	if err != nil {
		t.Fatalf("governance: %v", err)
	}
	h := &gwHarness{snaps: &governance.Holder{}, logs: &logBuffer{}}
	h.snaps.Store(snap)
	uc, err := upstream.New(url, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	proms, sessions := execution.NewPromotions(), session.NewRegistry(0, nil)
	br := NewBridge(uc, log)
	ann := NewAnnotations(h.snaps, uc, br, log)
	runner := execution.New(execution.Options{Upstream: uc, Sessions: sessions, Promotions: proms, Modern: br.ExecuteModern})
	tc := cfg.Tasks
	h.mgr = tasks.NewManager(st, runner, ann.Recheck, tasks.Options{
		DefaultTTL: tc.DefaultTTL.D(), MaxTTL: tc.MaxTTL.D(), PollInterval: tc.PollInterval.D(),
		Quotas: tc.Quotas, Workflow: h.snaps.Workflow, Logger: log,
	})
	t.Cleanup(func() { _ = h.mgr.Close() })
	h.tools = gwtools.New(h.mgr, nil, proms, gwtools.Options{Logger: log})
	h.gw = NewGateway(Deps{Snapshots: h.snaps, Upstream: uc, Sessions: sessions, Logger: log, Promotions: proms,
		Tasks: h.mgr, Tools: h.tools, Annotations: ann, Bridge: br})
	h.router = NewRouter()
	h.gw.Register(h.router)
	return h
}

// exchange builds an Exchange for one client request as the proxy would.
func exchange(t testing.TB, sess *session.Session, request string) *Exchange {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(request))
	if err != nil {
		t.Fatalf("request %s: %v", request, err)
	}
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(request))
	if sess != nil {
		r.Header.Set(upstream.HeaderSessionID, sess.ID)
	}
	return &Exchange{HTTP: r, Body: []byte(request), Msg: m, Session: sess}
}

// route runs one request through the router.
func (h *gwHarness) route(t testing.TB, sess *session.Session, request string) Result {
	t.Helper()
	return h.router.Route(context.Background(), exchange(t, sess, request))
}

// forward runs one forwarded request and its upstream response through the handler's
// Transform, returning the bytes the client gets.
func (h *gwHarness) forward(t testing.TB, sess *session.Session, request, response string) []byte {
	t.Helper()
	x := exchange(t, sess, request)
	res := h.router.Route(context.Background(), x)
	if res.Forward == nil {
		t.Fatalf("request %s was not forwarded: %+v", request, res)
	}
	return applyTransform(t, res.Forward, x, response)
}

func applyTransform(t testing.TB, f *Forward, x *Exchange, response string) []byte {
	t.Helper()
	if f.Transform == nil {
		return []byte(response)
	}
	m, err := jsonrpc.Parse([]byte(response))
	if err != nil {
		t.Fatalf("upstream response %s: %v", response, err)
	}
	if out := f.Transform(x, m); out != nil {
		return out
	}
	return []byte(response)
}

// wireError is a JSON-RPC error as the client decodes it.
type wireError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data"`
}

// replyError decodes a local reply that must be an error.
func replyError(t testing.TB, res Result) wireError {
	t.Helper()
	if res.Reply == nil {
		t.Fatalf("want a local error reply, got forward=%v wait=%v", res.Forward != nil, res.Wait != nil)
	}
	var r struct {
		Error  *wireError      `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(res.Reply, &r); err != nil || r.Error == nil {
		t.Fatalf("want an error reply, got %s", res.Reply)
	}
	return *r.Error
}

// replyResult decodes a local reply that must be a result.
func replyResult(t testing.TB, reply []byte) json.RawMessage {
	t.Helper()
	var r struct {
		Error  json.RawMessage `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(reply, &r); err != nil || r.Result == nil {
		t.Fatalf("want a result reply, got %s", reply)
	}
	return r.Result
}

// initUpstream feeds the gateway an initialize result declaring (or not) task support.
func (h *gwHarness) initUpstream(t testing.TB, tasksCap bool) {
	t.Helper()
	caps := `{"tools":{}}`
	if tasksCap {
		caps = `{"tools":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}`
	}
	h.forward(t, nil, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"serverInfo":{"name":"up","version":"1"}}}`)
	if h.gw.ann.SupportsTasks() != tasksCap {
		t.Fatalf("UpstreamSupportsTasks = %v, want %v", h.gw.ann.SupportsTasks(), tasksCap)
	}
}

// listTools feeds the gateway a tools/list page so it learns the upstream tools' own
// taskSupport.
func (h *gwHarness) listTools(t testing.TB, tools string) []byte {
	t.Helper()
	return h.forward(t, nil, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":`+tools+`}}`)
}
