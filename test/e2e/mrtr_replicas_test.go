package e2e

import (
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// Parked bridged calls (spec 2026-07-28 basic/patterns/mrtr across a legacy-only upstream) live
// in the replica that parked them: the upstream call waits there for the client's answer. The
// rule for a load balancer (docs/kubernetes.md "Load balancer"): keep a caller on one replica
// by hashing on what makes the caller's owner — server.identity_header when set, else the
// Authorization header, else the client address.

// balancer is a load balancer in front of backends: pick chooses the backend of each request
// (n backends). It counts the requests each backend got.
type balancer struct {
	URL  string
	mu   sync.Mutex
	hits []int
}

func startBalancer(t *testing.T, backends []string, pick func(r *http.Request, n int) int) *balancer {
	t.Helper()
	lb := &balancer{hits: make([]int, len(backends))}
	proxies := make([]*httputil.ReverseProxy, len(backends))
	// A transport of its own: http.DefaultTransport is shared with every other test of the
	// package, whose httptest servers close its connections when they stop (a relayed body
	// was cut once in a full -race run: "use of closed network connection").
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	for i, b := range backends {
		u, err := url.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		proxies[i] = &httputil.ReverseProxy{
			Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.URL.Path = u.Path; r.Out.Host = u.Host },
			FlushInterval: -1, // event streams pass at once
			Transport:     tr,
		}
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := pick(r, len(backends))
		lb.mu.Lock()
		lb.hits[i]++
		lb.mu.Unlock()
		proxies[i].ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	lb.URL = ts.URL + "/mcp"
	return lb
}

// hashOnAuthorization is the rule: one caller (its Authorization header) → one replica.
func hashOnAuthorization(r *http.Request, n int) int {
	h := fnv.New32a()
	h.Write([]byte(r.Header.Get("Authorization")))
	return int(h.Sum32() % uint32(n))
}

func startMRTRReplicas(t *testing.T) ([]*testkit.Gateway, []string) {
	t.Helper()
	upURL, _ := legacyOnlyUpstream(t)
	cfg := testkit.BasicConfig(upURL, "governance:\n  defaults: {action: forward}\n")
	var gs []*testkit.Gateway
	var mcp []string
	for range 2 {
		g := testkit.StartGateway(t, cfg, nil, nil)
		g.WaitReady(t)
		gs = append(gs, g)
		mcp = append(mcp, g.MCP)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("replica %s logs:\n%s", g.MCP, g.Logs.String())
			}
		})
	}
	return gs, mcp
}

// mrtrFirstRound starts the confirm call and returns the answers to its one question and its
// requestState.
func mrtrFirstRound(t *testing.T, c *modernClient, id int) (map[string]any, string) {
	t.Helper()
	r1 := c.call(id, "tools/call", map[string]any{"name": "confirm", "arguments": map[string]any{"what": "ship it"}})
	reqs, _ := testkit.Dig(r1, "result", "inputRequests").(map[string]any)
	state, _ := testkit.Dig(r1, "result", "requestState").(string)
	if testkit.Dig(r1, "result", "resultType") != "input_required" || len(reqs) != 1 || state == "" {
		t.Fatalf("round 1: %v", r1)
	}
	answers := map[string]any{}
	for k := range reqs {
		answers[k] = map[string]any{"action": "accept", "content": map[string]any{"ok": true}}
	}
	return answers, state
}

// TestMRTRContinuationOnOtherReplica: behind a balancer that sends each request to the next
// replica, the retry carrying inputResponses reaches the replica that did not park the call.
// It gets -32602 RequestStateOnOtherReplica (the call waits elsewhere; keep a caller on one
// replica, or call again without requestState), counted in
// tollgate_parked_calls_elsewhere_total — never a result, and never the call started again.
// The old code answered InvalidRequestState ("unknown, expired or not this caller's"), which
// did not tell the operator that the load balancer was the cause.
func TestMRTRContinuationOnOtherReplica(t *testing.T) {
	gs, replicas := startMRTRReplicas(t)
	var next atomic.Int64
	lb := startBalancer(t, replicas, func(_ *http.Request, n int) int { return int(next.Add(1)-1) % n })
	c := &modernClient{t: t, url: lb.URL, caps: map[string]any{"elicitation": map[string]any{}}, hdr: http.Header{"Authorization": {"Bearer rr"}}}
	answers, state := mrtrFirstRound(t, c, 1)
	r2 := c.call(2, "tools/call", map[string]any{"name": "confirm", "arguments": map[string]any{"what": "ship it"}, "inputResponses": answers, "requestState": state})
	if code, name := testkit.ErrorOf(r2); code != -32602 || name != "RequestStateOnOtherReplica" {
		t.Fatalf("retry on the other replica: %v, want -32602 RequestStateOnOtherReplica", r2)
	}
	if r2["result"] != nil {
		t.Fatalf("retry on the other replica got a result: %v", r2)
	}
	metrics := adminText(t, gs[1].Admin+"/metrics")
	if !strings.Contains(metrics, "tollgate_parked_calls_elsewhere_total 1") {
		t.Errorf("replica B's metrics do not count the misrouted retry:\n%s", grepLines(metrics, "parked"))
	}
	// A made-up state is still just invalid.
	r3 := c.call(3, "tools/call", map[string]any{"name": "confirm", "arguments": map[string]any{"what": "ship it"}, "inputResponses": answers, "requestState": "tgrs_nonsense"})
	if code, name := testkit.ErrorOf(r3); code != -32602 || name != "InvalidRequestState" {
		t.Errorf("made-up requestState: %v, want -32602 InvalidRequestState", r3)
	}
}

// TestMRTRBalancerHashingOnOwner: the documented configuration — a balancer hashing on the
// Authorization header — serves MRTR across two replicas: every caller's retry reaches the
// replica that parked its call, and every call completes with its answer.
func TestMRTRBalancerHashingOnOwner(t *testing.T) {
	_, replicas := startMRTRReplicas(t)
	lb := startBalancer(t, replicas, hashOnAuthorization)
	for i := range 8 {
		c := &modernClient{t: t, url: lb.URL, caps: map[string]any{"elicitation": map[string]any{}}, hdr: http.Header{"Authorization": {fmt.Sprintf("Bearer caller-%d", i)}}}
		// Under -race with the CPU saturated, the test balancer (httputil.ReverseProxy) now and
		// then has its relayed round-2 body cut ("use of closed network connection" on its own
		// side of the connection, then unexpected EOF at the client; about 1 run in 4 of 40
		// under two busy loops, never when the machine is idle; not keep-alive reuse, not the
		// inbound request's context). Not yet explained: a call whose transport failed is made
		// again from round 1, at most three times, and each cut is logged.
		var r2 map[string]any
		for attempt := 1; ; attempt++ {
			rep := c.tryDo(10*attempt+1, "tools/call", map[string]any{"name": "confirm", "arguments": map[string]any{"what": "ship it"}})
			if rep.Status != 0 {
				r1 := rep.Message(t)
				reqs, _ := testkit.Dig(r1, "result", "inputRequests").(map[string]any)
				state, _ := testkit.Dig(r1, "result", "requestState").(string)
				if testkit.Dig(r1, "result", "resultType") != "input_required" || len(reqs) != 1 || state == "" {
					t.Fatalf("caller %d, round 1: %v", i, r1)
				}
				answers := map[string]any{}
				for k := range reqs {
					answers[k] = map[string]any{"action": "accept", "content": map[string]any{"ok": true}}
				}
				rep = c.tryDo(10*attempt+2, "tools/call", map[string]any{"name": "confirm", "arguments": map[string]any{"what": "ship it"}, "inputResponses": answers, "requestState": state})
				if rep.Status != 0 {
					r2 = rep.Message(t)
					break
				}
			}
			if attempt == 3 {
				t.Fatalf("caller %d: transport failed three times: %s", i, rep.Body)
			}
			t.Logf("caller %d, attempt %d: transport failed through the test balancer (%s); calling again", i, attempt, rep.Body)
		}
		if testkit.Dig(r2, "result", "resultType") != "complete" || !strings.Contains(fmt.Sprint(testkit.Dig(r2, "result", "content")), "answer accept") {
			t.Fatalf("caller %d, round 2: %v", i, r2)
		}
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.hits[0] == 0 || lb.hits[1] == 0 {
		t.Errorf("requests per replica %v: the callers did not spread over both", lb.hits)
	}
}
