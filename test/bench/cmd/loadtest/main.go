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
	"strings"
	"sync"
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
	flag.IntVar(&o.policies, "policies", 100, "Cedar policies in the bench config")
	flag.StringVar(&o.goBench, "gobench", "", "file with `go test -bench` output to include in the report")
	flag.StringVar(&o.notes, "notes", "", "markdown file appended to the report (analysis written by hand)")
	flag.BoolVar(&o.quick, "quick", false, "short run (< 2 min): 1s cells, 2 rounds, 3 starts")
	flag.BoolVar(&o.keepLogs, "keep-logs", false, "keep the temp dir with process logs")
	flag.BoolVar(&o.resources, "resources", true, "measure start-to-ready, idle RSS and pending approvals")
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
	}
	log.SetFlags(log.Ltime)
	log.SetPrefix("loadtest: ")
	if err := run(o); err != nil {
		log.Fatal(err)
	}
}

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
		for _, pf := range profiles(o.limits) {
			rr, err := measureResources(o, pf, bin("tollgate"), cfgPath, up.url, dir)
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
	idleHeap         float64
	pending          int
	pendingRSS       int64
	pendingHeap      float64
	pendingElapsed   time.Duration
	pendingErrors    int
	pendingFirstErr  string
	pendingCreateAvg time.Duration
}

// measureResources starts fresh Tollgates: start-to-ready of each; idle RSS of the last one
// after it settled; then RSS with o.pending approvals waiting.
func measureResources(o options, pf profile, bin, cfg, upURL, dir string) (resourceResult, error) {
	rr := resourceResult{profile: pf}
	log.Printf("resources (%s): %d fresh starts", pf.name, o.starts)
	var last *proc
	for i := range max(o.starts, 1) {
		p, err := startTollgate(fmt.Sprintf("tollgate-start-%s-%d", pf.name, i), bin, cfg, upURL, adminToken, pf.env, dir)
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
	rr.pendingHeap = heapInuse(last.adminURL)
	if rr.pendingErrors > 0 {
		log.Printf("  pending approvals: %d errors, first: %s", rr.pendingErrors, rr.pendingFirstErr)
	}
	return rr, nil
}

// heapInuse reads go_memstats_heap_inuse_bytes from Tollgate's /metrics (0 if absent).
func heapInuse(adminURL string) float64 {
	resp, err := http.Get(adminURL + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}
