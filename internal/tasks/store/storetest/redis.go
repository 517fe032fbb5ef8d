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
func RedisURL(t *testing.T) string {
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

func startRedis(t *testing.T, bin string) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	dir := t.TempDir()
	var out strings.Builder
	cmd := exec.Command(bin, "--save", "", "--appendonly", "no", "--port", port, "--bind", "127.0.0.1", "--dir", dir)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
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
			t.Cleanup(stop)
			return addr, nil
		}
		select {
		case <-exited:
			return "", fmt.Errorf("redis-server exited: %s", out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return "", fmt.Errorf("redis-server on %s did not answer PING: %v", addr, err)
		}
	}
}
