package limits

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBudget(t *testing.T) {
	tests := []struct {
		name string
		max  int64
		ops  []int64 // >0 acquire, <0 release
		want []bool  // result of each acquire
		used int64
	}{
		{"fits", 10, []int64{4, 6}, []bool{true, true}, 10},
		{"over", 10, []int64{4, 7}, []bool{true, false}, 4},
		{"release makes room", 10, []int64{8, 3, -8, 3}, []bool{true, false, true}, 3},
		{"unlimited", 0, []int64{1 << 40}, []bool{true}, 0},
		{"zero is free", 1, []int64{1, 0}, []bool{true, true}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBudget(tt.max)
			var got []bool
			for _, n := range tt.ops {
				if n < 0 {
					b.Release(-n)
					continue
				}
				got = append(got, b.TryAcquire(n))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) || b.Used() != tt.used {
				t.Errorf("acquires %v used %d, want %v used %d", got, b.Used(), tt.want, tt.used)
			}
		})
	}
}

func TestBudgetConcurrent(t *testing.T) {
	b := NewBudget(100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := int64(0)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				if b.TryAcquire(7) {
					mu.Lock()
					peak = max(peak, b.Used())
					mu.Unlock()
					b.Release(7)
				}
			}
		}()
	}
	wg.Wait()
	if b.Used() != 0 || peak > 100 {
		t.Errorf("used %d after all releases, peak %d (max 100)", b.Used(), peak)
	}
}

// TestBudgetPerSource: one source holds at most its share (server.limits.
// max_inflight_body_bytes_per_source), so a client with stalled bodies leaves room for others;
// the whole budget still bounds them all, and a source is forgotten when it holds nothing.
func TestBudgetPerSource(t *testing.T) {
	type op struct {
		src  string
		n    int64 // >0 acquire, <0 release
		ok   bool  // acquire result
		mine bool  // refused by the source's share (BySource)
	}
	tests := []struct {
		name           string
		max, perSource int64
		ops            []op
		used           int64
	}{
		{"a flood stops at its share", 100, 40, []op{
			{"a", 16, true, false}, {"a", 16, true, false}, {"a", 16, false, true},
			{"b", 40, true, false}, {"c", 30, false, false}, // 32+40+30 > 100: the whole budget
			{"c", 28, true, false},
		}, 100},
		{"release makes room in the share", 100, 40, []op{
			{"a", 40, true, false}, {"a", 1, false, true}, {"a", -40, false, false}, {"a", 40, true, false},
		}, 40},
		{"no share: the whole budget", 100, 0, []op{{"a", 100, true, false}, {"b", 1, false, false}}, 100},
		{"share above the budget is the budget", 100, 500, []op{{"a", 100, true, false}, {"a", 1, false, false}}, 100},
		{"unlimited", 0, 10, []op{{"a", 1 << 40, true, false}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewSharedBudget(tt.max, tt.perSource)
			for i, o := range tt.ops {
				s := b.For(o.src)
				if o.n < 0 {
					s.Release(-o.n)
					continue
				}
				if got := s.TryAcquire(o.n); got != o.ok || (!got && s.BySource != o.mine) {
					t.Fatalf("op %d (%s takes %d): %v by source %v, want %v by source %v", i, o.src, o.n, got, s.BySource, o.ok, o.mine)
				}
			}
			if b.Used() != tt.used {
				t.Errorf("used %d, want %d", b.Used(), tt.used)
			}
		})
	}
}

func TestBudgetPerSourceConcurrent(t *testing.T) {
	b := NewSharedBudget(1000, 100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := map[string]int64{}
	for i := range 16 {
		src := fmt.Sprint("s", i%4)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := b.For(src)
			for range 1000 {
				if s.TryAcquire(7) {
					mu.Lock()
					peak[src] = max(peak[src], b.UsedBy(src))
					mu.Unlock()
					s.Release(7)
				}
			}
		}()
	}
	wg.Wait()
	for src, p := range peak {
		if p > 100 {
			t.Errorf("source %s peaked at %d bytes, share 100", src, p)
		}
	}
	if b.Used() != 0 || b.sources() != 0 {
		t.Errorf("after all releases: used %d, %d sources remembered; want 0, 0", b.Used(), b.sources())
	}
}

// serve runs h behind a capped listener on loopback.
func serve(t *testing.T, h http.Handler, maxConns int) (*Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewListener(ln, maxConns, "test", nil)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return l, ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// statusOf sends a GET on c and returns the status code (0 on a connection error).
func statusOf(c net.Conn) int {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return 0
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestListenerCap(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	l, addr := serve(t, ok, 2)
	a, b := dial(t, addr), dial(t, addr)
	if statusOf(a) != 200 || statusOf(b) != 200 {
		t.Fatal("connections within the cap must be served")
	}
	// The third is answered 503 and closed at once instead of waiting in the backlog.
	if got := statusOf(dial(t, addr)); got != http.StatusServiceUnavailable {
		t.Fatalf("connection beyond the cap: status %d, want 503", got)
	}
	if l.Refused() != 1 {
		t.Errorf("refused = %d, want 1", l.Refused())
	}
	// Closing one frees its slot.
	a.Close()
	deadline := time.Now().Add(10 * time.Second)
	for l.Open() > 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := statusOf(dial(t, addr)); got != 200 {
		t.Errorf("after a slot was freed: status %d, want 200", got)
	}
}

func TestDeadlinesStalledBody(t *testing.T) {
	read := make(chan error, 1)
	h := Deadlines(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		read <- err
	}), 100*time.Millisecond, time.Second)
	_, addr := serve(t, h, 0)
	c := dial(t, addr)
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\npartial")
	select {
	case err := <-read:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("reading a stalled body: %v, want a timeout", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a stalled body was never cut")
	}
	// The handler is done; the connection must end too, not wait for the rest of the body.
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(c); isTimeout(err) {
		t.Error("the connection stayed open after the body deadline")
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestDeadlinesLongReplyAfterBody(t *testing.T) {
	// The body deadline must not cut a reply that takes longer than it once the body is in.
	h := Deadlines(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc := http.NewResponseController(w)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 4 {
			fmt.Fprintf(w, "data: %s %d\n\n", b, i)
			_ = rc.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(60 * time.Millisecond): // 4 × 60 ms > the 50 ms body deadline
			}
		}
	}), 50*time.Millisecond, time.Second)
	_, addr := serve(t, h, 0)
	resp, err := http.Post("http://"+addr+"/", "text/plain", strings.NewReader("hi"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if strings.Count(string(got), "data: hi") != 4 {
		t.Errorf("stream was cut: %q", got)
	}
}

func TestDeadlinesStalledReader(t *testing.T) {
	// A client that stops reading a stream is disconnected by the write deadline; one that
	// reads is not.
	ended := make(chan error, 1)
	h := Deadlines(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		chunk := []byte("data: " + strings.Repeat("x", 64<<10) + "\n\n")
		for {
			if _, err := w.Write(chunk); err != nil {
				ended <- err
				return
			}
			if err := rc.Flush(); err != nil {
				ended <- err
				return
			}
		}
	}), time.Second, 100*time.Millisecond)
	_, addr := serve(t, h, 0)
	c := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	// Never read: socket buffers fill, the next write blocks and must time out.
	select {
	case err := <-ended:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("writing to a stalled reader ended with %v, want a timeout", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a stalled reader was never disconnected")
	}
}

func TestDeadlinesKeepAliveNextRequest(t *testing.T) {
	// The write deadline armed by one request must not fail the next request on the same
	// connection, however long the client waited between them.
	h := Deadlines(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	}), 50*time.Millisecond, 50*time.Millisecond)
	_, addr := serve(t, h, 0)
	c := dial(t, addr)
	br := bufio.NewReader(c)
	for i := range 2 {
		if i == 1 {
			time.Sleep(150 * time.Millisecond) // past both deadlines of the first request
		}
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Fatalf("request %d: %q", i, b)
		}
	}
}

// TestListenerHold: places held for parked calls count against the connection cap like open
// connections, and are given back.
func TestListenerHold(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	l := NewListener(ln, 2, "MCP", nil)
	if !l.Hold() || !l.Hold() || l.Hold() {
		t.Fatal("a cap of 2 must hold exactly 2 places")
	}
	if l.Open() != 2 {
		t.Fatalf("open %d, want 2", l.Open())
	}
	l.Unhold()
	if !l.Hold() {
		t.Fatal("a place given back was not free again")
	}
}
