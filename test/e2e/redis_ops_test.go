package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/demo"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// binaryReplica is a Tollgate run as the real binary in a process of its own, so a test can
// kill it with SIGKILL.
type binaryReplica struct {
	*testkit.Gateway
	cmd    *exec.Cmd
	exited chan struct{}
	logs   *testkit.SyncBuffer
}

// startBinaryReplica runs bin with cfg on free loopback ports (approverEnv set) and waits
// until /readyz answers 200. Stopped (SIGKILL) at cleanup; its output is logged on failure.
func startBinaryReplica(t *testing.T, bin, name, cfg string) *binaryReplica {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tollgate.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	listen, admin := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, "run", "--config", cfgPath)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TOLLGATE_LISTEN=" + listen, "TOLLGATE_ADMIN_LISTEN=" + admin,
		"TOLLGATE_ADMIN_TOKEN=" + testkit.AdminToken, "TOLLGATE_DATA_DIR=" + filepath.Join(dir, "data")}
	for k, v := range approverEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	r := &binaryReplica{cmd: cmd, exited: make(chan struct{}), logs: &testkit.SyncBuffer{}}
	cmd.Stdout, cmd.Stderr = r.logs, r.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		r.Kill()
		if t.Failed() {
			t.Logf("replica %s's output:\n%s", name, r.logs.String())
		}
	})
	r.Gateway = &testkit.Gateway{MCP: "http://" + listen + "/mcp", Admin: "http://" + admin, Logs: r.logs, Dir: dir}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := testkit.HTTPClient.Get(r.Admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r
			}
		}
		select {
		case <-r.exited:
			t.Fatalf("replica %s exited at start:\n%s", name, r.logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s not ready within 20s:\n%s", name, r.logs.String())
		}
	}
}

// Kill sends SIGKILL (no graceful stop: nothing the process holds is handed over) and waits
// for the process to end. Killing twice is harmless.
func (r *binaryReplica) Kill() {
	_ = r.cmd.Process.Kill()
	<-r.exited
}

// transferArgsN is a transfer whose amount identifies the call at the upstream (the demo
// records every transfer it makes).
func transferArgsN(n int) map[string]any {
	return map[string]any{"from_account": "acc-payroll", "to_account": "acc-savings", "amount": n, "currency": "USD"}
}

// executedByAmount counts the demo's transfers per amount.
func executedByAmount(d *demo.Demo) map[int]int {
	out := map[int]int{}
	for _, tr := range d.Transfers() {
		out[int(tr.Amount)]++
	}
	return out
}

// approveVia approves tid through g (alice); reports the HTTP status (0 when g did not answer).
func approveVia(g *testkit.Gateway, tid string) int {
	st, _, err := g.TryAdminRequest("POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{}`)
	if err != nil {
		return 0
	}
	return st
}

// taskState reads tid's state through g's approvals API ("" when g does not answer).
func taskState(g *testkit.Gateway, tid string) (state, msg string) {
	st, view, err := g.TryAdminRequest("GET", "/api/v1/approvals/"+tid, "alice-secret-token", "")
	if err != nil || st != 200 {
		return "", fmt.Sprint(st, err)
	}
	s, _ := view["state"].(string)
	m, _ := view["statusMessage"].(string)
	return s, m
}

// createTransfer2025 sends a task-augmented transfer_funds with amount n on c; "" when no
// task came back (the store was away: TaskCreateFailed).
func createTransfer2025(c *testkit.RPC, n int) (string, error) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": n, "method": "tools/call",
		"params": map[string]any{"name": "transfer_funds", "arguments": transferArgsN(n), "task": map[string]any{"ttl": 600000}}})
	r, err := c.TryPost(string(b))
	if err != nil {
		return "", err
	}
	var m map[string]any
	if err := json.Unmarshal(lastResponse(r), &m); err != nil {
		return "", fmt.Errorf("HTTP %d: %s", r.Status, r.Body)
	}
	tid, _ := testkit.Dig(m, "result", "task", "taskId").(string)
	if !strings.HasPrefix(tid, "tg_") {
		return "", fmt.Errorf("no task: %v", m)
	}
	return tid, nil
}

// lastResponse is the JSON-RPC response of r (JSON body or the last SSE data line).
func lastResponse(r testkit.Reply) []byte {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		return r.Body
	}
	var last []byte
	for _, line := range strings.Split(string(r.Body), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && (strings.Contains(d, `"result"`) || strings.Contains(d, `"error"`)) {
			last = []byte(d)
		}
	}
	return last
}

// TestSentinelFailoverApprovals: Tollgate (the real binary) on a Redis primary + replica
// watched by redis-sentinel (tasks.store.sentinel). A client keeps creating approval calls
// (each a transfer with its own amount) and an approver approves each; the primary is killed
// with SIGKILL while that goes on. Once the Sentinel has promoted the replica, new calls are
// created and approved again through the same process (no restart), every approved call
// completes, and the upstream ran each exactly once. A decision the old primary acknowledged
// but had not replicated (Redis replication is asynchronous; docs/operations.md "Redis
// Sentinel") shows up as a task pending again; the test decides it again, as an approver
// would, and logs it.
func TestSentinelFailoverApprovals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and waits for a Sentinel failover")
	}
	s := storetest.StartSentinel(t) // skips without redis-server/redis-sentinel (fails in CI)
	d, up := testkit.StartDemo(t)
	bin := buildBinary(t)
	// tasks.execution_lease stays at its default (30 s), longer than the failover: a lease
	// shorter than the time Redis is away lapses for calls running meanwhile, and they fail as
	// interrupted (docs/operations.md "Redis Sentinel").
	g := startBinaryReplica(t, bin, "A", testkit.BasicConfig(up, approvalRules+`tasks:
  store:
    type: redis
    url: "redis:///0?key_prefix=failover:"
    sentinel: {master_name: `+s.Master+`, addresses: ["`+s.Addr+`"]}
`))
	c := g.NewClient(t)
	mod := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"Authorization": {"Bearer failover-caller"}}}
	// The persistence check reaches the primary through the Sentinel (the test's Redis keeps
	// nothing on disk).
	if !strings.Contains(g.logs.String(), "Redis is not set up to keep tasks") {
		t.Errorf("no persistence WARN through the Sentinel:\n%s", g.logs.String())
	}

	type call struct {
		n        int
		tid      string
		afterFOV bool // created after the failover was complete
	}
	var (
		mu       sync.Mutex
		approved []call
		failed   int // creations or approvals that failed while Redis was away
		lost     int // tasks created before the kill that the new primary never had
		fovDone  = make(chan struct{})
		started  = make(chan struct{}, 64)
	)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	trafficDone := make(chan error, 1)
	go func() {
		after := 0
		for n := 1; ctx.Err() == nil; n++ {
			fov := false
			select {
			case <-fovDone:
				fov = true
			default:
			}
			var tid string
			var err error
			if n%2 == 0 { // both eras: even amounts are 2026-07-28 calls
				if tid = modernTransfer(mod, n, n); tid == "" {
					err = fmt.Errorf("no task")
				}
			} else {
				tid, err = createTransfer2025(c, n)
			}
			if err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
				time.Sleep(50 * time.Millisecond)
				continue
			}
			for ctx.Err() == nil {
				st := approveVia(g.Gateway, tid)
				if st == 200 {
					break
				}
				if st == 409 {
					trafficDone <- fmt.Errorf("approve %s: HTTP 409, decided by nobody else", tid)
					return
				}
				if st == 404 { // its creation was acknowledged but not replicated: gone
					mu.Lock()
					lost++
					mu.Unlock()
					tid = ""
					break
				}
				mu.Lock()
				failed++
				mu.Unlock()
				time.Sleep(50 * time.Millisecond)
			}
			if tid == "" {
				continue
			}
			mu.Lock()
			approved = append(approved, call{n: n, tid: tid, afterFOV: fov})
			mu.Unlock()
			select {
			case started <- struct{}{}:
			default:
			}
			if fov {
				if after++; after == 10 {
					trafficDone <- nil
					return
				}
			}
		}
		trafficDone <- ctx.Err()
	}()
	for range 10 { // approvals are landing: kill the primary now
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("no approvals before the kill")
		}
	}
	s.KillPrimary()
	killed := time.Now()
	s.WaitFailover(t)
	t.Logf("Sentinel promoted the replica %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	close(fovDone)
	if err := <-trafficDone; err != nil {
		t.Fatalf("traffic: %v", err)
	}

	// Every approved call completes (a decision lost in the failover is taken again).
	mu.Lock()
	calls := append([]call(nil), approved...)
	mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	again := 0
	for _, cl := range calls {
		for {
			state, msg := taskState(g.Gateway, cl.tid)
			if state == "completed" {
				break
			}
			if state == "awaiting_approval" {
				again++
				t.Logf("task %s (amount %d) is pending again after the failover (its approval was not replicated); approving again", cl.tid, cl.n)
				approveVia(g.Gateway, cl.tid)
			}
			if state == "failed" || state == "rejected" || time.Now().After(deadline) {
				t.Fatalf("approved call %s (amount %d) is %q (%s), want completed", cl.tid, cl.n, state, msg)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	after := 0
	for _, cl := range calls {
		if cl.afterFOV {
			after++
		}
	}
	ran := executedByAmount(d)
	for _, cl := range calls {
		if ran[cl.n] != 1 {
			t.Errorf("call %s (amount %d) ran %d times upstream, want exactly once", cl.tid, cl.n, ran[cl.n])
		}
	}
	for n, k := range ran {
		if k > 1 {
			t.Errorf("amount %d ran %d times", n, k)
		}
	}
	mu.Lock()
	t.Logf("%d calls approved and completed (%d after the failover), %d requests refused while Redis was away, %d approvals taken again, %d created tasks lost with the old primary",
		len(calls), after, failed, again, lost)
	mu.Unlock()
	if after < 10 {
		t.Errorf("only %d approvals after the failover, want 10", after)
	}
	// The promoted replica has the store's epoch marker (replicated): the health probe does
	// not take the failover for a Redis that lost its data.
	waitFor(t, "/readyz 200 after the failover", func() bool {
		st, _ := readyz(t, g.Gateway)
		return st == 200
	})
	if strings.Contains(g.logs.String(), "LOST ITS DATA") {
		t.Error("the failover was reported as a store that lost its data")
	}
}

// modernTransfer creates a 2026-07-28 task-augmented transfer with amount n; "" on failure.
func modernTransfer(c *modernClient, id, n int) string {
	r := c.tryDo(id, "tools/call", map[string]any{"name": "transfer_funds", "arguments": transferArgsN(n)})
	var m map[string]any
	_ = json.Unmarshal(lastResponse(r), &m)
	tid, _ := testkit.Dig(m, "result", "taskId").(string)
	if !strings.HasPrefix(tid, "tg_") {
		return ""
	}
	return tid
}

// TestReplicaKilledDuringApprovalBurst: two Tollgates on one real redis-server; replica A is
// the real binary. Calls are held in both eras (2025-11-25 task-augmented, 2026-07-28 tasks
// extension) on both replicas, each a transfer with its own amount; then an approver approves
// them all, alternating between the replicas, and A is killed with SIGKILL while the
// approvals land. Within a bounded time every approved task is finished — completed by a
// live replica, or failed with ExecutionInterrupted (a 2025-11-25 call whose session was on
// A, or a call A was running) — none stays approved or executing, and the upstream ran each
// call at most once, a completed one exactly once. Before approved 2026-07-28 tasks got a
// start lease, the ones A approved but had not claimed stayed approved until their TTL.
func TestReplicaKilledDuringApprovalBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	url := storetest.RedisURL(t) // skips loudly without redis-server
	d, up := testkit.StartDemo(t)
	bin := buildBinary(t)
	cfg := testkit.BasicConfig(up, approvalRules+`server:
  identity_header: X-Test-User
tasks:
  execution_lease: 3s
  store: {type: redis, url: "`+url+`?key_prefix=burst-kill:"}
`)
	a := startBinaryReplica(t, bin, "A", cfg)
	b := testkit.StartGateway(t, cfg, approverEnv, nil)
	b.WaitReady(t)

	const perKind = 25 // tasks per era and replica
	type held struct {
		tid, kind string
		n         int
	}
	var tasks []held
	n := 0
	for _, g := range []*testkit.Gateway{a.Gateway, b} {
		where := "A"
		if g == b {
			where = "B"
		}
		old := identifiedClient(t, g, "carol-"+where)
		mod := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"X-Test-User": {"dave-" + where}}}
		for range perKind {
			n++
			tid, err := createTransfer2025(old, n)
			if err != nil {
				t.Fatalf("2025-11-25 call on %s: %v", where, err)
			}
			tasks = append(tasks, held{tid, "2025-11-25 on " + where, n})
			n++
			if tid = modernTransfer(mod, n, n); tid == "" {
				t.Fatalf("2026-07-28 call on %s: no task", where)
			}
			tasks = append(tasks, held{tid, "2026-07-28 on " + where, n})
		}
	}

	// The burst: four approvers at once, alternating replicas. A third of the way in, A is
	// killed right as it acknowledges approving a 2026-07-28 task (the call starts after the
	// acknowledgement: the moment a replica dies between approving and claiming).
	var (
		wg        sync.WaitGroup
		approvedN sync.Map
		cmu       sync.Mutex
		count     int
		once      sync.Once
		killed    = make(chan struct{})
	)
	next := make(chan held)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for h := range next {
				onA := (h.n+w)%2 == 0
				st := 0
				if onA {
					st = approveVia(a.Gateway, h.tid)
				}
				cmu.Lock()
				count++
				late := count > len(tasks)/3
				cmu.Unlock()
				if onA && st == 200 && late && strings.HasPrefix(h.kind, "2026") {
					once.Do(func() { a.Kill(); close(killed) })
				}
				if st != 200 && st != 409 {
					st = approveVia(b, h.tid) // through B, or A is gone
				}
				if st == 200 || st == 409 {
					approvedN.Store(h.tid, h)
				}
			}
		}()
	}
	for _, h := range tasks {
		next <- h
	}
	close(next)
	wg.Wait()
	once.Do(func() { a.Kill(); close(killed) })
	<-killed

	// Bounded: the start and execution leases are 3 s; every task must be finished well
	// within 25 s, never left for its TTL (10 m).
	deadline := time.Now().Add(25 * time.Second)
	final := map[string]string{}
	byState := map[string]int{}
	for _, h := range tasks {
		if _, ok := approvedN.Load(h.tid); !ok {
			t.Errorf("%s task %s was never approved", h.kind, h.tid)
			continue
		}
		for {
			state, msg := taskState(b, h.tid)
			if state == "completed" || state == "failed" {
				final[h.tid] = state
				byState[h.kind+" "+state]++
				if state == "failed" && !strings.Contains(msg, "stopped answering") {
					t.Errorf("%s task %s failed with %q, want the replica-gone message", h.kind, h.tid, msg)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s task %s is still %q (%s) 25 s after the burst: stranded", h.kind, h.tid, state, msg)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	ran := executedByAmount(d)
	for _, h := range tasks {
		switch k := ran[h.n]; {
		case k > 1:
			t.Errorf("%s task %s ran %d times upstream", h.kind, h.tid, k)
		case final[h.tid] == "completed" && k != 1:
			t.Errorf("%s task %s completed but ran %d times upstream", h.kind, h.tid, k)
		}
	}
	// Calls held on B never depended on A: they all complete.
	for _, kind := range []string{"2025-11-25 on B", "2026-07-28 on B"} {
		if byState[kind+" completed"] != perKind {
			t.Errorf("%s: %d completed, want all %d", kind, byState[kind+" completed"], perKind)
		}
	}
	t.Logf("outcomes: %v", byState)
}
