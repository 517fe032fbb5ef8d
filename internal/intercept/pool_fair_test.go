package intercept

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// sessionUpstream is a legacy-only upstream on loopback that keeps sessions: each initialize
// opens one (its id names the Authorization it was opened with), DELETE ends it. It answers
// server/discover -32601, so Tollgate bridges 2026-07-28 callers to it.
type sessionUpstream struct {
	srv *httptest.Server

	mu     sync.Mutex
	seq    int
	opened map[string]int  // Authorization → sessions opened with it
	ended  map[string]bool // session ids DELETEd
	byAuth map[string]string
}

func newSessionUpstream(t *testing.T) *sessionUpstream {
	t.Helper()
	u := &sessionUpstream{opened: map[string]int{}, ended: map[string]bool{}, byAuth: map[string]string{}}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			http.Error(w, "no stream", http.StatusMethodNotAllowed)
			return
		case http.MethodDelete:
			u.mu.Lock()
			u.ended[r.Header.Get(upstream.HeaderSessionID)] = true
			u.mu.Unlock()
			return
		}
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Parse(body)
		if err != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		if m.Kind != jsonrpc.KindRequest {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch m.Method {
		case "server/discover":
			_, _ = w.Write(jsonrpc.ErrorResponse(m.ID, jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "", "no")))
		case "initialize":
			u.mu.Lock()
			u.seq++
			auth := r.Header.Get("Authorization")
			sid := fmt.Sprintf("s%d", u.seq)
			u.opened[auth]++
			u.byAuth[auth] = sid
			u.mu.Unlock()
			w.Header().Set(upstream.HeaderSessionID, sid)
			_, _ = w.Write(jsonrpc.ResultResponse(m.ID, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"up","version":"1"}}`)))
		default:
			_, _ = w.Write(jsonrpc.ResultResponse(m.ID, json.RawMessage(`{"content":[{"type":"text","text":"ran"}]}`)))
		}
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// session is the id and state of the last session opened with auth.
func (u *sessionUpstream) session(auth string) (sid string, opened int, ended bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	sid = u.byAuth[auth]
	return sid, u.opened[auth], u.ended[sid]
}

// bridgedCall runs one 2026-07-28 tools/call from remote with credential auth through the
// gateway (a legacy upstream: the call is bridged) and fails unless it ran.
func (h *gwHarness) bridgedCall(t *testing.T, remote, auth, tool string) {
	t.Helper()
	x := modernExchange(t, "tools/call", `{"name":"`+tool+`","arguments":{}}`, noCaps, "Authorization", auth)
	x.HTTP.RemoteAddr = remote
	res := h.routeModern(x)
	if res.Wait == nil {
		t.Fatalf("tools/call %s was not bridged: %+v", tool, res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out := res.Wait(ctx, func([]byte) bool { return false }); !strings.Contains(string(out), `"ran"`) {
		t.Fatalf("tools/call %s from %s: %s", tool, remote, out)
	}
}

// TestBridgedToolsCallFairAcrossSources: 1100 bridged tools/call from one address, each with a
// new credential (a new owner, so a new upstream session: more than the pool's 1000), do not
// end the upstream session of a caller at another address, whether that session was opened by
// the caller's own tools/call or by the execution of its approved call (charged to the task's
// creator). On the old code the direct call's upstream call ran on a context without the
// source, every session was charged to "", and the pool's eviction was plain LRU: the other
// caller's idle session was ended.
func TestBridgedToolsCallFairAcrossSources(t *testing.T) {
	u := newSessionUpstream(t)
	h := newHarnessOn(t, unitConfig, u.srv.URL+"/mcp")
	t.Cleanup(h.gw.Close)

	// bob's session, opened by his own call; carol's, by the execution of her approved call.
	h.bridgedCall(t, "192.0.2.2:1000", "Bearer bob", "hello")
	x := modernExchange(t, "tools/call", `{"name":"delete_x","arguments":{}}`, tasksCaps, "Authorization", "Bearer carol")
	x.HTTP.RemoteAddr = "192.0.2.3:1000"
	if res := h.routeModern(x); statusOf(res) != http.StatusOK {
		t.Fatalf("carol's approval call: %+v", res)
	}
	all, err := h.mgr.ListAll(t.Context(), tasksAll)
	if err != nil || len(all) != 1 {
		t.Fatalf("carol's task: %v %v", all, err)
	}
	if _, err := h.mgr.Approve(t.Context(), all[0].ID, "alice", "ok"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, opened, _ := u.session("Bearer carol"); opened == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("carol's approved call did not run upstream")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Let the execution release its session before the flood.
	for deadline := time.Now().Add(10 * time.Second); ; {
		tk, err := h.mgr.Lookup(t.Context(), all[0].ID)
		if err == nil && tk.State.Terminal() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("carol's approved call did not finish")
		}
		time.Sleep(5 * time.Millisecond)
	}

	for i := range 1100 {
		h.bridgedCall(t, "192.0.2.1:1000", fmt.Sprintf("Bearer flood-%d", i), "hello")
	}
	for _, who := range []string{"Bearer bob", "Bearer carol"} {
		if sid, opened, ended := u.session(who); ended || opened != 1 {
			t.Errorf("%s's upstream session %s: ended %v, %d opened; want kept, 1", who, sid, ended, opened)
		}
	}
	if _, _, ended := u.session("Bearer flood-0"); !ended {
		t.Error("the flooding source's oldest session was kept: the pool did not make room with it")
	}
	// bob's next call finds his session (and its state) where he left it.
	h.bridgedCall(t, "192.0.2.2:1000", "Bearer bob", "hello")
	if _, opened, _ := u.session("Bearer bob"); opened != 1 {
		t.Errorf("bob's next call opened a new session (%d opened)", opened)
	}
}

// parkVia parks a new call of owner from remote as a bridged request's MRTR round does
// (inputRound) and returns its requestState (or the error reply) and its context.
func (h *gwHarness) parkVia(t *testing.T, remote, owner string) (string, context.Context) {
	t.Helper()
	x := modernExchange(t, "tools/call", `{"name":"hello","arguments":{}}`, noCaps)
	x.HTTP.RemoteAddr = remote
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pc := &parkedCall{owner: owner, cancel: cancel, pending: map[string]parkedRequest{}}
	out := h.gw.inputRound(x, pc)
	var r struct {
		Result struct {
			RequestState string `json:"requestState"`
		} `json:"result"`
	}
	_ = json.Unmarshal(out, &r)
	if r.Result.RequestState == "" {
		return string(out), ctx
	}
	return r.Result.RequestState, ctx
}

// TestParkedCallsFairAcrossSources: 3000 anonymous bridged calls parked from one address (the
// issue's flood) do not end the calls parked by ten callers elsewhere: a source past its share
// gives way with its own oldest. On the old code one bound of 1000 for all made an arbitrary
// parked call give way per new one, so the others' calls were cancelled (all ten survive
// there with a probability of about 0.13^10).
func TestParkedCallsFairAcrossSources(t *testing.T) {
	h := newHarness(t, unitConfig)
	t.Cleanup(h.gw.Close)
	type victim struct {
		tok, owner string
		ctx        context.Context
	}
	var victims []victim
	for i := range 10 {
		owner := fmt.Sprintf("auth:v%d", i)
		tok, ctx := h.parkVia(t, fmt.Sprintf("192.0.2.%d:1000", 10+i), owner)
		victims = append(victims, victim{tok, owner, ctx})
	}
	var first context.Context
	for i := range 3000 {
		_, ctx := h.parkVia(t, "192.0.2.1:1000", "anon:"+fmt.Sprint(i))
		if i == 0 {
			first = ctx
		}
	}
	for i, v := range victims {
		if v.ctx.Err() != nil {
			t.Errorf("victim %d's parked call was cancelled by another address's flood", i)
			continue
		}
		if h.gw.modern.parked.take(v.tok, v.owner) == nil {
			t.Errorf("victim %d could not resume its parked call", i)
		}
	}
	if first.Err() == nil {
		t.Error("the flooding source's oldest parked call is still parked")
	}
}

// countSlots is a connection budget of max places (Slots).
type countSlots struct {
	mu        sync.Mutex
	used, max int
}

func (c *countSlots) Hold() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.used >= c.max {
		return false
	}
	c.used++
	return true
}

func (c *countSlots) Unhold() {
	c.mu.Lock()
	c.used--
	c.mu.Unlock()
}

func (c *countSlots) inUse() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// TestParkedCallsBounded: parked calls are bounded per source and in total (the source holding
// the most gives way), each holds a place in the connection budget while parked and gives it
// back when resumed, evicted or shut down, and a call the budget has no place for is refused
// with -32013 ServerBusy (its upstream call cancelled).
func TestParkedCallsBounded(t *testing.T) {
	h := newHarness(t, unitConfig)
	slots := &countSlots{max: 20}
	h.gw.modern.parked = parking{slots: slots, perSource: 4, total: 10}
	t.Cleanup(h.gw.Close)

	for i := range 6 { // A: 6 parked, its share 4
		h.parkVia(t, "192.0.2.1:1", fmt.Sprint("auth:a", i))
	}
	if n, used := h.gw.modern.parked.len(), slots.inUse(); n != 4 || used != 4 {
		t.Fatalf("after A's 6: %d parked, %d places held; want 4, 4", n, used)
	}
	bTok, _ := h.parkVia(t, "192.0.2.2:1", "auth:b")
	for i := range 3 {
		h.parkVia(t, "192.0.2.3:1", fmt.Sprint("auth:c", i))
	}
	for i := range 3 { // 4+1+3 = 8, then the total of 10 is reached: A (4) gives way first
		h.parkVia(t, "192.0.2.4:1", fmt.Sprint("auth:d", i))
	}
	if n := h.gw.modern.parked.len(); n != 10 || slots.inUse() != 10 {
		t.Fatalf("%d parked, %d places held; want 10, 10", n, slots.inUse())
	}
	if got := h.gw.modern.parked.table().Held("ip:192.0.2.1"); got != 3 {
		t.Errorf("A holds %d at the total, want 3 (it held the most)", got)
	}
	if h.gw.modern.parked.take(bTok, "auth:b") == nil {
		t.Fatal("B's single parked call gave way")
	}
	if slots.inUse() != 9 {
		t.Errorf("a resumed call kept its place: %d held", slots.inUse())
	}
	// The budget is full of connections: a new call cannot be parked.
	slots.mu.Lock()
	slots.max = slots.used
	slots.mu.Unlock()
	out, ctx := h.parkVia(t, "192.0.2.5:1", "auth:e")
	if !strings.Contains(out, `"ServerBusy"`) || !strings.Contains(out, "-32013") || ctx.Err() == nil {
		t.Fatalf("a call with no place in the budget: %s (cancelled %v)", out, ctx.Err() != nil)
	}
	h.gw.modern.parked.closeAll()
	if slots.inUse() != 0 || h.gw.modern.parked.len() != 0 {
		t.Errorf("after shutdown: %d places held, %d parked", slots.inUse(), h.gw.modern.parked.len())
	}
}
