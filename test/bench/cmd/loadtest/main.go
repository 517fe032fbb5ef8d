// Command loadtest is Tollgate's load harness. It starts the bench upstream, a bare
// httputil.ReverseProxy and Tollgate as separate processes, drives every scenario against
// every target in interleaved rounds from MCP clients in this process, measures Tollgate's
// resources from /proc, and writes a markdown report.
//
//	go run ./test/bench/cmd/loadtest -bin bin -out report.md          # full (≈ 7 min)
//	go run ./test/bench/cmd/loadtest -bin bin -quick -out report.md   # quick (< 2 min)
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tollgate-mcp/tollgate/test/bench/mcpclient"
)

type options struct {
	bin       string
	out       string
	duration  time.Duration
	warmup    time.Duration
	rounds    int
	clients   int
	limits    bool
	only      string
	starts    int
	pending   int
	policies  int
	goBench   string
	notes     string
	quick     bool
	keepLogs  bool
	resources bool
	stdio     bool
	auth      bool
	noAudit   bool
	held      int
	// heldClamped: -held was lowered to fit the open-files limit (heldFit).
	heldClamped bool
}

// heldFit is how many held calls Tollgate accepts under this process's open-files limit
// (inherited by the Tollgate it starts): server.connectionCaps keeps 128 descriptors and
// counts two per connection; 16 are left for the harness's sessions and probes.
func heldFit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 1 << 30
	}
	return max(int((rl.Cur-128)/2)-16, 0)
}

const adminToken = "bench-admin-token-0123"

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "directory holding tollgate, benchupstream and bareproxy")
	flag.StringVar(&o.out, "out", "", "markdown report path (default: stdout)")
	flag.DurationVar(&o.duration, "duration", 4*time.Second, "measured time of one scenario on one target in one round")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unrecorded run of each scenario on each target before the rounds")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; each round runs every scenario on every target, targets rotated")
	flag.IntVar(&o.clients, "clients", 32, "clients of the concurrent passthrough scenario")
	flag.BoolVar(&o.limits, "limits", true, "also run the proxies under sidecar-like limits (GOMAXPROCS=1, GOMEMLIMIT=128MiB)")
	flag.StringVar(&o.only, "only", "", "comma list of scenario ids to run (default all)")
	flag.IntVar(&o.starts, "starts", 5, "fresh Tollgate starts for start-to-ready and idle RSS")
	flag.IntVar(&o.pending, "pending", 10000, "pending approvals created for the memory-per-approval measure (0 = skip)")
	flag.IntVar(&o.held, "held", 10000, "plain calls held on their connection (sync_approval: hold) for the memory-per-held-call measure (0 = skip)")
	flag.IntVar(&o.policies, "policies", 100, "Cedar policies in the bench config")
	flag.StringVar(&o.goBench, "gobench", "", "file with `go test -bench` output to include in the report")
	flag.StringVar(&o.notes, "notes", "", "markdown file appended to the report (analysis written by hand)")
	flag.BoolVar(&o.quick, "quick", false, "short run (< 2 min): 1s cells, 2 rounds, 3 starts")
	flag.BoolVar(&o.keepLogs, "keep-logs", false, "keep the temp dir with process logs")
	flag.BoolVar(&o.resources, "resources", true, "measure start-to-ready, idle RSS and pending approvals")
	flag.BoolVar(&o.auth, "auth", true, `also measure "tollgate (caller auth)": callers sending JWT access tokens Tollgate verifies (server.caller_auth), with per-caller tool lists and pinned tool definitions`)
	flag.BoolVar(&o.noAudit, "no-audit", true, `also measure "tollgate (no audit)": the bench config without an audit log, for the cost of one audit line per decision`)
	flag.BoolVar(&o.stdio, "stdio", true, `also measure "tollgate (stdio)": the same upstream run by Tollgate over stdin/stdout`)
	flag.Parse()
	if o.quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["duration"] {
			o.duration = time.Second
		}
		if !set["warmup"] {
			o.warmup = 300 * time.Millisecond
		}
		if !set["rounds"] {
			o.rounds = 2
		}
		if !set["starts"] {
			o.starts = 3
		}
		if !set["pending"] {
			o.pending = 3000
		}
		if !set["held"] {
			o.held = 3000
		}
	}
	log.SetFlags(log.Ltime)
	log.SetPrefix("loadtest: ")
	if fit := heldFit(); o.held > fit {
		// Tollgate refuses connections beyond (open-files limit − 128) / 2 with 503; the
		// measure is about memory, not about that refusal.
		log.Printf("-held %d lowered to %d to fit the open-files limit (raise ulimit -n for more)", o.held, fit)
		o.held, o.heldClamped = fit, true
	}
	if err := run(o); err != nil {
		log.Fatal(err)
	}
}

// noAuditTarget names the Tollgate without an audit log.
const noAuditTarget = "tollgate (no audit)"

// authTarget names the Tollgate that verifies callers' bearer tokens (server.caller_auth).
const authTarget = "tollgate (caller auth, pins)"

// stdioTarget names the Tollgate whose upstream is benchupstream over stdio.
const stdioTarget = "tollgate (stdio)"

// profile is one set of proxy processes: as they run by default, or under sidecar limits.
type profile struct {
	name    string
	env     []string
	limited bool
}

func profiles(limits bool) []profile {
	ps := []profile{{name: "default"}}
	if limits {
		ps = append(ps, profile{name: "limited", env: []string{"GOMAXPROCS=1", "GOMEMLIMIT=128MiB"}, limited: true})
	}
	return ps
}

func run(o options) error {
	began := time.Now()
	bin := func(n string) string { return filepath.Join(o.bin, n) }
	for _, n := range []string{"tollgate", "benchupstream", "bareproxy"} {
		if _, err := os.Stat(bin(n)); err != nil {
			return fmt.Errorf("%s missing: build it first (test/bench/run.sh does)", bin(n))
		}
	}
	dir, err := os.MkdirTemp("", "tollgate-bench-")
	if err != nil {
		return err
	}
	if o.keepLogs {
		log.Printf("logs and config in %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	cfgPath, err := writeTollgateConfig(dir, o.policies)
	if err != nil {
		return err
	}
	const listTools, bigBytes = 1000, 1 << 20
	up, err := startListening("upstream", bin("benchupstream"),
		[]string{"-tools", fmt.Sprint(listTools), "-big-bytes", fmt.Sprint(bigBytes)}, nil, dir)
	if err != nil {
		return err
	}
	defer up.stop()
	log.Printf("upstream %s (pid %d)", up.url, up.cmd.Process.Pid)

	targets := []*target{{name: "direct", kind: kindDirect, url: up.url}}
	var procs []*proc
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	for _, pf := range profiles(o.limits) {
		suffix := ""
		if pf.limited {
			suffix = " (limited)"
		}
		bp, err := startListening("bareproxy-"+pf.name, bin("bareproxy"), []string{"-upstream", up.url}, pf.env, dir)
		if err != nil {
			return err
		}
		procs = append(procs, bp)
		tg, err := startTollgate("tollgate-"+pf.name, bin("tollgate"), cfgPath, up.url, adminToken, pf.env, dir)
		if err != nil {
			return err
		}
		procs = append(procs, tg)
		log.Printf("bare proxy%s pid %d, tollgate%s pid %d (ready in %s)", suffix, bp.cmd.Process.Pid, suffix, tg.cmd.Process.Pid, tg.ready.Round(time.Millisecond))
		targets = append(targets,
			&target{name: "bare proxy" + suffix, kind: kindBare, limited: pf.limited, p: bp, url: bp.url},
			&target{name: "tollgate" + suffix, kind: kindTollgate, limited: pf.limited, p: tg, url: tg.url})
	}
	if o.noAudit {
		ncfg, err := writeNoAuditConfig(dir, o.policies)
		if err != nil {
			return err
		}
		na, err := startTollgate("tollgate-noaudit", bin("tollgate"), ncfg, up.url, adminToken, nil, dir)
		if err != nil {
			return err
		}
		procs = append(procs, na)
		log.Printf("tollgate (no audit) pid %d (ready in %s)", na.cmd.Process.Pid, na.ready.Round(time.Millisecond))
		targets = append(targets, &target{name: noAuditTarget, kind: kindTollgate, p: na, url: na.url})
	}
	if o.auth {
		is, err := startIssuer()
		if err != nil {
			return err
		}
		defer is.stop()
		acfg, err := writeAuthConfig(dir, o.policies, is)
		if err != nil {
			return err
		}
		at, err := startTollgate("tollgate-auth", bin("tollgate"), acfg, up.url, adminToken, nil, dir)
		if err != nil {
			return err
		}
		procs = append(procs, at)
		tok, err := is.token("bench-agent", []string{"agents"})
		if err != nil {
			return err
		}
		log.Printf("tollgate (caller auth) pid %d (ready in %s)", at.cmd.Process.Pid, at.ready.Round(time.Millisecond))
		targets = append(targets, &target{name: authTarget, kind: kindTollgate, p: at, url: at.url, authorization: "Bearer " + tok})
	}
	if o.stdio {
		// The same server (benchupstream -stdio, same tools), started by Tollgate per session.
		scfg, err := writeStdioConfig(dir, o.policies, 2*o.clients+8, []string{bin("benchupstream"), "-stdio",
			"-tools", fmt.Sprint(listTools), "-big-bytes", fmt.Sprint(bigBytes)})
		if err != nil {
			return err
		}
		st, err := startTollgate("tollgate-stdio", bin("tollgate"), scfg, "", adminToken, nil, dir)
		if err != nil {
			return err
		}
		procs = append(procs, st)
		log.Printf("tollgate (stdio) pid %d (ready in %s)", st.cmd.Process.Pid, st.ready.Round(time.Millisecond))
		targets = append(targets, &target{name: stdioTarget, kind: kindTollgate, p: st, url: st.url})
	}
	for _, t := range targets {
		t.tr = mcpclient.NewTransport(o.clients)
	}
	env := opEnv{admin: &http.Client{Transport: mcpclient.NewTransport(4), Timeout: 30 * time.Second}, token: adminToken}

	scs := scenarios(o.clients, listTools, bigBytes)
	if o.only != "" {
		keep := strings.Split(o.only, ",")
		scs = slices.DeleteFunc(scs, func(s scenario) bool { return !slices.Contains(keep, s.id) })
		if len(scs) == 0 {
			return fmt.Errorf("-only %q matches no scenario", o.only)
		}
	}
	applies := func(sc scenario, t *target) bool { return !sc.tollgateOnly || t.kind == kindTollgate }

	if o.warmup > 0 {
		log.Printf("warm-up: %s per scenario and target", o.warmup)
		for _, sc := range scs {
			for _, t := range targets {
				if applies(sc, t) {
					if _, err := runCell(sc, t, up, env, o.warmup); err != nil {
						return err
					}
				}
			}
		}
	}

	results := map[string]map[string][]*cell{} // scenario → target → per round
	for r := range o.rounds {
		log.Printf("round %d/%d", r+1, o.rounds)
		for _, sc := range scs {
			if results[sc.id] == nil {
				results[sc.id] = map[string][]*cell{}
			}
			// Rotate the target order each round so none always runs first or last.
			for i := range targets {
				t := targets[(i+r)%len(targets)]
				if !applies(sc, t) {
					continue
				}
				c, err := runCell(sc, t, up, env, o.duration)
				if err != nil {
					return err
				}
				if c.errors > 0 {
					log.Printf("  %s on %s: %d errors, first: %s", sc.id, t.name, c.errors, c.firstErr)
				}
				results[sc.id][t.name] = append(results[sc.id][t.name], c)
			}
		}
	}

	var res []resourceResult
	if o.resources {
		resCfg, err := writeResourcesConfig(dir, o.policies, o.held)
		if err != nil {
			return err
		}
		for _, pf := range profiles(o.limits) {
			rr, err := measureResources(o, pf, bin("tollgate"), resCfg, up.url, dir)
			if err != nil {
				return err
			}
			res = append(res, rr)
		}
	}

	rep := &report{o: o, scenarios: scs, targets: targets, results: results, resources: res,
		started: began, elapsed: time.Since(began)}
	out := os.Stdout
	if o.out != "" {
		f, err := os.Create(o.out)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	w := bufio.NewWriter(out)
	rep.write(w)
	if err := w.Flush(); err != nil {
		return err
	}
	log.Printf("done in %s", time.Since(began).Round(time.Second))
	return nil
}

// resourceResult is what fresh Tollgate processes of one profile cost.
type resourceResult struct {
	profile          profile
	readies          []time.Duration
	idleRSS          int64
	idleAnon         int64
	idleHeap         float64
	pending          int
	pendingRSS       int64
	pendingAnon      int64
	pendingHeap      float64
	pendingElapsed   time.Duration
	pendingErrors    int
	pendingFirstErr  string
	pendingCreateAvg time.Duration
	held             heldResult
}

// heldResult is what plain calls held on their connections cost one process.
type heldResult struct {
	calls      int     // held calls started
	reached    float64 // tollgate_held_calls when all were sent (or when waiting for them gave up)
	before     int64   // RSS before them
	rss        int64   // RSS with them
	anonBefore int64   // RssAnon before them
	anon       int64   // RssAnon with them
	heapBefore float64 // heap in use before them
	heap       float64
	goroutines float64 // go_goroutines with them, minus before
	openFiles  int     // the process's open descriptors with them
	nofile     int     // its open-files limit: Tollgate lowers max_connections to (nofile-128)/2
	elapsed    time.Duration
	errors     int // calls answered or failed before the end (none should be)
	firstErr   string
	maxConns   int // server.limits.max_connections of the config
}

// measureResources starts fresh Tollgates: start-to-ready of each; idle RSS of the last one
// after it settled; then RSS with o.pending approvals waiting.
func measureResources(o options, pf profile, bin, cfg, upURL, dir string) (resourceResult, error) {
	rr, err := measureStartsAndPending(o, pf, bin, cfg, upURL, dir)
	if err == nil && o.held > 0 {
		rr.held, err = measureHeld(o.held, pf, bin, cfg, upURL, dir)
	}
	return rr, err
}

func measureStartsAndPending(o options, pf profile, bin, cfg, upURL, dir string) (resourceResult, error) {
	rr := resourceResult{profile: pf}
	log.Printf("resources (%s): %d fresh starts", pf.name, o.starts)
	var last *proc
	for i := range max(o.starts, 1) {
		name := fmt.Sprintf("tollgate-start-%s-%d", pf.name, i)
		// Each process its own file store (bbolt locks it; the next start overlaps this one).
		env := append(slices.Clone(pf.env), "TOLLGATE_DATA_DIR="+filepath.Join(dir, "data-"+name))
		p, err := startTollgate(name, bin, cfg, upURL, adminToken, env, dir)
		if err != nil {
			return rr, err
		}
		rr.readies = append(rr.readies, p.ready)
		if last != nil {
			last.stop()
		}
		last = p
	}
	defer last.stop()
	time.Sleep(2 * time.Second) // let start-up garbage be collected and the scavenger run
	var err error
	if rr.idleRSS, err = last.rss(); err != nil {
		return rr, err
	}
	if rr.idleAnon, err = last.rssAnon(); err != nil {
		return rr, err
	}
	rr.idleHeap = heapInuse(last.adminURL)
	if o.pending <= 0 {
		return rr, nil
	}
	log.Printf("resources (%s): %d pending approvals", pf.name, o.pending)
	rr.pending = o.pending
	hc := &http.Client{Transport: mcpclient.NewTransport(8)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const workers = 8
	params := json.RawMessage(`{"name":"approve_action","arguments":{"text":"pending approval"},"task":{"ttl":600000}}`)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			c, err := mcpclient.Connect(ctx, last.url, hc)
			if err != nil {
				mu.Lock()
				rr.pendingErrors++
				rr.pendingFirstErr = err.Error()
				mu.Unlock()
				return
			}
			// Sessions stay open: their tasks must stay pending.
			for i := w; i < o.pending; i += workers {
				rep, err := c.Call(ctx, "tools/call", params)
				if err == nil && rep.Error != nil {
					err = rep.Error
				}
				if err != nil {
					mu.Lock()
					rr.pendingErrors++
					if rr.pendingFirstErr == "" {
						rr.pendingFirstErr = err.Error()
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	rr.pendingElapsed = time.Since(start)
	rr.pendingCreateAvg = rr.pendingElapsed * workers / time.Duration(o.pending)
	time.Sleep(2 * time.Second)
	if rr.pendingRSS, err = last.rss(); err != nil {
		return rr, err
	}
	if rr.pendingAnon, err = last.rssAnon(); err != nil {
		return rr, err
	}
	rr.pendingHeap = heapInuse(last.adminURL)
	if rr.pendingErrors > 0 {
		log.Printf("  pending approvals: %d errors, first: %s", rr.pendingErrors, rr.pendingFirstErr)
	}
	return rr, nil
}

// measureHeld starts a fresh Tollgate and opens n plain tools/call requests of a tool that
// needs approval, each on its own connection, from 8 sessions; under sync_approval: hold each
// waits on its connection. Each session sends the same call, so its calls attach to one task
// (as retries do): the figure is the cost of a held connection, apart from the pending
// approval (measured above), and the /metrics scrapes that watch for them stay cheap (the
// tollgate_pending_tasks collector lists every pending task). When tollgate_held_calls says
// all n are held, the RSS growth over n is the cost of one held call. The calls are then
// abandoned and the process stopped.
func measureHeld(n int, pf profile, bin, cfg, upURL, dir string) (heldResult, error) {
	hr := heldResult{calls: n, maxConns: n + 256}
	log.Printf("resources (%s): %d held plain calls", pf.name, n)
	name := "tollgate-held-" + pf.name
	p, err := startTollgate(name, bin, cfg, upURL, adminToken, append(slices.Clone(pf.env), "TOLLGATE_DATA_DIR="+filepath.Join(dir, "data-"+name)), dir)
	if err != nil {
		return hr, err
	}
	defer p.stop()
	time.Sleep(2 * time.Second) // settle as for idle RSS
	if hr.before, err = p.rss(); err != nil {
		return hr, err
	}
	if hr.anonBefore, err = p.rssAnon(); err != nil {
		return hr, err
	}
	hr.heapBefore = heapInuse(p.adminURL)
	goBefore := metricValue(p.adminURL, "go_goroutines")
	tr := mcpclient.NewTransport(8)
	tr.MaxIdleConnsPerHost, tr.MaxIdleConns = 8, 8 // a connection per held call; none kept after
	hc := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	calls, stop := context.WithCancel(ctx)
	defer stop()
	const sessions = 8
	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if calls.Err() != nil {
			return // abandoned on purpose
		}
		if hr.errors++; hr.firstErr == "" {
			hr.firstErr = err.Error()
		}
	}
	var wg sync.WaitGroup
	start := time.Now()
	for s := range sessions {
		c, err := mcpclient.Connect(ctx, p.url, hc)
		if err != nil {
			return hr, fmt.Errorf("held calls: session: %w", err)
		}
		params := json.RawMessage(`{"name":"approve_action","arguments":{"text":"held call"}}`)
		for i := s; i < n; i += sessions {
			wg.Go(func() {
				// A Client sends one request at a time; each held call gets its own on the session.
				call := &mcpclient.Client{URL: c.URL, HTTP: c.HTTP, SessionID: c.SessionID}
				rep, err := call.Call(calls, "tools/call", params)
				if err == nil {
					err = fmt.Errorf("answered before the end: %s", rep.Result)
					if rep.Error != nil {
						err = rep.Error
					}
				}
				fail(err)
			})
		}
	}
	// Wait until Tollgate holds them all (or the errors say it will not).
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		hr.reached = metricValue(p.adminURL, "tollgate_held_calls")
		mu.Lock()
		errs := hr.errors
		mu.Unlock()
		if int(hr.reached)+errs >= n {
			break
		}
		select {
		case <-ctx.Done():
			log.Printf("  held calls: only %.0f of %d held after %s", hr.reached, n, time.Since(start).Round(time.Second))
			stop()
			wg.Wait()
			return hr, nil
		case <-poll.C:
		}
	}
	hr.elapsed = time.Since(start)
	time.Sleep(2 * time.Second) // as for the other figures: let the GC and the scavenger settle
	hr.reached = metricValue(p.adminURL, "tollgate_held_calls")
	if hr.rss, err = p.rss(); err != nil {
		return hr, err
	}
	if hr.anon, err = p.rssAnon(); err != nil {
		return hr, err
	}
	hr.heap = heapInuse(p.adminURL)
	hr.goroutines = metricValue(p.adminURL, "go_goroutines") - goBefore
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid)); err == nil {
		hr.openFiles = len(fds)
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", p.cmd.Process.Pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(strings.TrimPrefix(line, "Max open files")); len(f) > 0 && strings.HasPrefix(line, "Max open files") {
				hr.nofile, _ = strconv.Atoi(f[0])
			}
		}
	}
	stop()
	wg.Wait()
	if hr.errors > 0 {
		log.Printf("  held calls: %d errors, first: %s", hr.errors, hr.firstErr)
	}
	return hr, nil
}

// heapInuse reads go_memstats_heap_inuse_bytes from Tollgate's /metrics (0 if absent).
func heapInuse(adminURL string) float64 { return metricValue(adminURL, "go_memstats_heap_inuse_bytes") }

// metricValue reads one unlabelled series from Tollgate's /metrics (0 if absent).
func metricValue(adminURL, series string) float64 {
	resp, err := http.Get(adminURL + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}
