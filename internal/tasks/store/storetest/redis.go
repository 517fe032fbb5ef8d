package storetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisURL returns the URL of a real Redis for this test: TOLLGATE_TEST_REDIS_URL if set,
// else a redis-server started on a free loopback port and stopped by t.Cleanup.
func RedisURL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("TOLLGATE_TEST_REDIS_URL"); u != "" {
		return u
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("SKIPPING REDIS TASK STORE TESTS: redis-server is not on PATH " +
			"(install it, e.g. apt-get install -y redis-server, or set TOLLGATE_TEST_REDIS_URL)")
	}
	var lastErr error
	for range 3 { // the free port may be taken between Close and redis-server's bind
		addr, err := startRedis(t, bin)
		if err == nil {
			return "redis://" + addr + "/0"
		}
		lastErr = err
	}
	t.Fatalf("starting redis-server: %v", lastErr)
	return ""
}

// RedisServer is a redis-server of this test's own, without persistence, that the test may
// stop and start again on the same port (a Redis restart that loses every key).
type RedisServer struct {
	t    *testing.T
	bin  string
	port string
	stop func()
}

// StartRedis starts a RedisServer (skips the test without redis-server on PATH).
func StartRedis(t *testing.T) *RedisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("SKIPPING: redis-server is not on PATH (install it, e.g. apt-get install -y redis-server)")
	}
	var lastErr error
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
		_ = l.Close()
		stop, err := runRedis(t, bin, port)
		if err == nil {
			rs := &RedisServer{t: t, bin: bin, port: port, stop: stop}
			t.Cleanup(rs.Stop)
			return rs
		}
		lastErr = err
	}
	t.Fatalf("starting redis-server: %v", lastErr)
	return nil
}

// URL is the server's URL (database 0).
func (rs *RedisServer) URL() string { return "redis://127.0.0.1:" + rs.port + "/0" }

// Stop kills the server (SIGKILL); every key is gone. Stopping twice is harmless.
func (rs *RedisServer) Stop() {
	if rs.stop != nil {
		rs.stop()
		rs.stop = nil
	}
}

// Start starts a stopped server again on the same port, empty.
func (rs *RedisServer) Start() {
	rs.t.Helper()
	stop, err := runRedis(rs.t, rs.bin, rs.port)
	if err != nil {
		rs.t.Fatalf("restarting redis-server: %v", err)
	}
	rs.stop = stop
}

func startRedis(t testing.TB, bin string) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	stop, err := runRedis(t, bin, port)
	if err != nil {
		return "", err
	}
	t.Cleanup(stop)
	return net.JoinHostPort("127.0.0.1", port), nil
}

// runRedis starts redis-server without persistence on port and waits for its PING.
func runRedis(t testing.TB, bin, port string) (func(), error) {
	dir := t.TempDir()
	var out strings.Builder
	cmd := exec.Command(bin, "--save", "", "--appendonly", "no", "--port", port, "--bind", "127.0.0.1", "--dir", dir)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	addr := net.JoinHostPort("127.0.0.1", port)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return stop, nil
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("redis-server exited: %s", out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("redis-server on %s did not answer PING: %v", addr, err)
		}
	}
}
