package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/tollgate-mcp/tollgate/test/bench/mcpclient"
)

type kind int

const (
	kindDirect kind = iota
	kindBare
	kindTollgate
)

// target is one endpoint the clients talk to.
type target struct {
	name    string
	kind    kind
	limited bool
	p       *proc // nil for the upstream itself (direct)
	url     string
	tr      *http.Transport
	// authorization, when set, is sent on every MCP request (the caller's bearer token).
	authorization string
}

// client is the HTTP client of t's MCP requests.
func (t *target) client() *http.Client {
	if t.authorization != "" {
		return &http.Client{Transport: bearer{next: t.tr, value: t.authorization}}
	}
	return &http.Client{Transport: t.tr}
}

// sample is one measured operation.
type sample struct {
	lat    time.Duration
	ttfb   time.Duration
	stages [3]time.Duration // approval: create, approve, result
}

// opEnv is what an operation may need besides its client.
type opEnv struct {
	t     *target
	admin *http.Client
	token string
}

// scenario is one workload.
type scenario struct {
	id           string
	title        string
	clients      int
	tollgateOnly bool
	op           func(ctx context.Context, e *opEnv, c *mcpclient.Client, s *sample) error
}

var (
	echoParams   = json.RawMessage(`{"name":"echo","arguments":{"text":"hello"}}`)
	bigParams    = json.RawMessage(`{"name":"big","arguments":{}}`)
	policyParams = json.RawMessage(`{"name":"transfer_funds","arguments":{"from_account":"acct-0001","to_account":"acct-0002","amount":250,"currency":"EUR"}}`)
	listParams   = json.RawMessage(`{}`)
	taskParams   = json.RawMessage(`{"name":"approve_action","arguments":{"text":"x"},"task":{"ttl":60000}}`)
)

func scenarios(clients int, listTools, bigBytes int) []scenario {
	return []scenario{
		{id: "echo-1", title: "Plain tools/call passthrough (small result), 1 client", clients: 1, op: opCall(echoParams, 0)},
		{id: fmt.Sprintf("echo-%d", clients), title: fmt.Sprintf("Plain tools/call passthrough (small result), %d clients", clients), clients: clients, op: opCall(echoParams, 0)},
		{id: "list-1000", title: fmt.Sprintf("tools/list of an upstream with %d tools, 1 client", listTools), clients: 1, op: opList(listTools)},
		{id: "big-sse", title: "1 MiB tool result streamed as SSE, 1 client", clients: 1, op: opCall(bigParams, bigBytes)},
		{id: "policy-100", title: "action: policy call decided by 100 Cedar policies, 1 client", clients: 1, op: opCall(policyParams, 0)},
		{id: "approval", title: "Approval flow: task-augmented call → approve via API → tasks/result, 1 client", clients: 1, tollgateOnly: true, op: opApproval},
	}
}

// opCall sends tools/call with params and checks the result has at least minBytes.
func opCall(params json.RawMessage, minBytes int) func(context.Context, *opEnv, *mcpclient.Client, *sample) error {
	return func(ctx context.Context, e *opEnv, c *mcpclient.Client, s *sample) error {
		start := time.Now()
		rep, err := c.Call(ctx, "tools/call", params)
		s.lat = time.Since(start)
		if err != nil {
			return err
		}
		s.ttfb = rep.TTFB
		if rep.Error != nil {
			return rep.Error
		}
		if len(rep.Result) < minBytes {
			return fmt.Errorf("result %d bytes, want ≥ %d", len(rep.Result), minBytes)
		}
		// Over stdio mcp-go writes notifications from another goroutine than replies, so the
		// log message that makes the HTTP reply SSE may come after the result: JSON then.
		if minBytes > 0 && !rep.SSE && e.t.name != stdioTarget {
			return fmt.Errorf("big result did not arrive as SSE")
		}
		return nil
	}
}

func opList(wantTools int) func(context.Context, *opEnv, *mcpclient.Client, *sample) error {
	return func(ctx context.Context, _ *opEnv, c *mcpclient.Client, s *sample) error {
		start := time.Now()
		rep, err := c.Call(ctx, "tools/list", listParams)
		s.lat = time.Since(start)
		if err != nil {
			return err
		}
		if rep.Error != nil {
			return rep.Error
		}
		// Counting the tools costs the harness, not the target; only check the size is plausible.
		if len(rep.Result) < wantTools*50 {
			return fmt.Errorf("tools/list result only %d bytes", len(rep.Result))
		}
		return nil
	}
}

// opApproval is one governed call end to end, the human taken out: create the task, approve
// it through the admin API, fetch the result.
func opApproval(ctx context.Context, e *opEnv, c *mcpclient.Client, s *sample) error {
	t0 := time.Now()
	rep, err := c.Call(ctx, "tools/call", taskParams)
	t1 := time.Now()
	s.stages[0] = t1.Sub(t0)
	if err != nil {
		return err
	}
	if rep.Error != nil {
		return rep.Error
	}
	var cr struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if err := json.Unmarshal(rep.Result, &cr); err != nil || cr.Task.TaskID == "" {
		return fmt.Errorf("no task in reply: %s", truncate(rep.Result))
	}
	if err := approve(ctx, e, cr.Task.TaskID); err != nil {
		return err
	}
	t2 := time.Now()
	s.stages[1] = t2.Sub(t1)
	rep, err = c.Call(ctx, "tasks/result", map[string]string{"taskId": cr.Task.TaskID})
	t3 := time.Now()
	s.stages[2] = t3.Sub(t2)
	s.lat = t3.Sub(t0)
	if err != nil {
		return err
	}
	if rep.Error != nil {
		return rep.Error
	}
	return nil
}

func approve(ctx context.Context, e *opEnv, taskID string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		e.t.p.adminURL+"/api/v1/approvals/"+taskID+"/approve", bytes.NewReader([]byte(`{"reason":"bench"}`)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.admin.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("approve: HTTP %d: %s", resp.StatusCode, truncate(buf.Bytes()))
	}
	return nil
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// cell is the measurement of one scenario against one target in one round.
type cell struct {
	samples  []sample
	elapsed  time.Duration
	errors   int
	firstErr string
	cpu      time.Duration // the proxy process's CPU time (0 for direct)
	upCPU    time.Duration // the upstream's CPU time
	rssMax   int64
}

// runCell connects sc.clients sessions to t, runs sc.op in each for dur and measures.
func runCell(sc scenario, t *target, up *proc, env opEnv, dur time.Duration) (*cell, error) {
	hc := t.client()
	ctx, cancel := context.WithTimeout(context.Background(), dur+60*time.Second)
	defer cancel()
	clients := make([]*mcpclient.Client, sc.clients)
	var cerr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			c, err := mcpclient.Connect(ctx, t.url, hc)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && cerr == nil {
				cerr = err
			}
			clients[i] = c
		})
	}
	wg.Wait()
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	if cerr != nil {
		return nil, fmt.Errorf("%s on %s: connecting: %w", sc.id, t.name, cerr)
	}

	res := &cell{}
	stopRSS := make(chan struct{})
	rssDone := make(chan struct{})
	go func() {
		defer close(rssDone)
		if t.p == nil {
			return
		}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if r, err := t.p.rss(); err == nil && r > res.rssMax {
				res.rssMax = r
			}
			select {
			case <-stopRSS:
				return
			case <-tick.C:
			}
		}
	}()
	cpu0, up0 := cpuOf(t.p), cpuOf(up)
	start := time.Now()
	end := start.Add(dur)
	per := make([][]sample, len(clients))
	for i, c := range clients {
		wg.Go(func() {
			e := env
			e.t = t
			buf := make([]sample, 0, 4096)
			for time.Now().Before(end) {
				var s sample
				if err := sc.op(ctx, &e, c, &s); err != nil {
					mu.Lock()
					res.errors++
					if res.firstErr == "" {
						res.firstErr = err.Error()
					}
					mu.Unlock()
					if ctx.Err() != nil {
						return
					}
					time.Sleep(time.Millisecond) // do not spin on a broken target
					continue
				}
				buf = append(buf, s)
			}
			per[i] = buf
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.cpu, res.upCPU = cpuOf(t.p)-cpu0, cpuOf(up)-up0
	close(stopRSS)
	<-rssDone
	for _, b := range per {
		res.samples = append(res.samples, b...)
	}
	return res, nil
}

func cpuOf(p *proc) time.Duration {
	if p == nil {
		return 0
	}
	d, _ := p.cpuTime()
	return d
}
