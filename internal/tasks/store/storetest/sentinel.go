package storetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// NeedBinary returns the path of a Redis binary the test needs. Missing, the test skips
// with a message saying how to install it, except in CI ($CI=true), where
// scripts/ensure-deps.sh installs it and a missing one is a failure.
func NeedBinary(t testing.TB, name, pkg string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err == nil {
		return bin
	}
	msg := fmt.Sprintf("%s is not on PATH (install it: apt-get install -y %s, or scripts/ensure-deps.sh)", name, pkg)
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true: " + msg)
	}
	t.Skip("SKIPPING: " + msg)
	return ""
}

// Sentinel is a Redis primary, one replica of it and one redis-sentinel (quorum 1) watching
// them, all on loopback ports of this test, stopped by t.Cleanup. The Sentinel marks a
// primary down after 1 s without an answer, so a killed primary is replaced within seconds.
type Sentinel struct {
	Master    string // the name the Sentinel monitors
	Password  string // the Sentinel's requirepass ("" = none)
	Addr      string // the Sentinel's host:port
	Primary   string // the primary's host:port at start
	Replica   string // the replica's host:port at start
	killFirst func()
}

// StartSentinel starts the set and waits until the Sentinel knows the replica (it must, to
// promote it). Skips without redis-server or redis-sentinel (fails in CI).
func StartSentinel(t *testing.T) *Sentinel { t.Helper(); return StartSentinelWithPassword(t, "") }

// StartSentinelWithPassword is StartSentinel with the Sentinel requiring password (its
// requirepass; the Redis servers require none).
func StartSentinelWithPassword(t *testing.T, password string) *Sentinel {
	t.Helper()
	server := NeedBinary(t, "redis-server", "redis-server")
	sentinel := NeedBinary(t, "redis-sentinel", "redis-sentinel")
	s := &Sentinel{Master: "tollgate-test", Password: password}
	var stop func()
	s.Primary, stop = startConfigured(t, server, "")
	s.killFirst = stop
	s.Replica, _ = startConfigured(t, server, "replicaof "+strings.Replace(s.Primary, ":", " ", 1)+"\n")
	waitUntil(t, "the replica to sync with the primary", func(ctx context.Context) bool {
		c := redis.NewClient(&redis.Options{Addr: s.Replica, MaxRetries: -1})
		defer c.Close()
		info, _ := c.Info(ctx, "replication").Result()
		return strings.Contains(info, "master_link_status:up")
	})
	host, port, _ := net.SplitHostPort(s.Primary)
	extra := fmt.Sprintf(
		"sentinel monitor %[1]s %s %s 1\nsentinel down-after-milliseconds %[1]s 1000\nsentinel failover-timeout %[1]s 10000\nsentinel parallel-syncs %[1]s 1\n",
		s.Master, host, port)
	if password != "" {
		extra += "requirepass " + password + "\n"
	}
	s.Addr, _ = startConfiguredAuth(t, sentinel, extra, password)
	waitUntil(t, "the Sentinel to know the replica", func(ctx context.Context) bool {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, Password: s.Password, MaxRetries: -1})
		defer c.Close()
		r, err := c.Replicas(ctx, s.Master).Result()
		return err == nil && len(r) > 0
	})
	return s
}

// KillPrimary kills the first primary with SIGKILL (no shutdown, no last save).
func (s *Sentinel) KillPrimary() { s.killFirst() }

// CurrentPrimary asks the Sentinel for the primary's address.
func (s *Sentinel) CurrentPrimary(ctx context.Context) (string, error) {
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, Password: s.Password, MaxRetries: -1})
	defer c.Close()
	a, err := c.GetMasterAddrByName(ctx, s.Master).Result()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(a[0], a[1]), nil
}

// WaitFailover waits (bounded) until the Sentinel names the replica as the primary and the
// replica answers as one.
func (s *Sentinel) WaitFailover(t testing.TB) {
	t.Helper()
	waitUntil(t, "the Sentinel to promote the replica", func(ctx context.Context) bool {
		a, err := s.CurrentPrimary(ctx)
		if err != nil || a != s.Replica {
			return false
		}
		c := redis.NewClient(&redis.Options{Addr: s.Replica, MaxRetries: -1})
		defer c.Close()
		info, _ := c.Info(ctx, "replication").Result()
		return strings.Contains(info, "role:master")
	})
}

// startConfigured starts bin (redis-server or redis-sentinel) with a config file of its own
// (Sentinel rewrites it; a promoted replica's CONFIG REWRITE needs one) on a free loopback
// port, without persistence, and waits for its PING. Retries a port taken meanwhile.
func startConfigured(t testing.TB, bin, extra string) (addr string, stop func()) {
	t.Helper()
	return startConfiguredAuth(t, bin, extra, "")
}

// startConfiguredAuth is startConfigured for a server that requires password.
func startConfiguredAuth(t testing.TB, bin, extra, password string) (addr string, stop func()) {
	t.Helper()
	var lastErr error
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
		_ = l.Close()
		dir := t.TempDir()
		conf := filepath.Join(dir, "redis.conf")
		body := "port " + port + "\nbind 127.0.0.1\ndir " + dir + "\nsave \"\"\nappendonly no\n" + extra
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		addr = net.JoinHostPort("127.0.0.1", port)
		stop, err = startProcess(t, dir, bin, []string{conf}, func(ctx context.Context) error {
			c := redis.NewClient(&redis.Options{Addr: addr, Password: password, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
			defer c.Close()
			return c.Ping(ctx).Err()
		})
		if err == nil {
			t.Cleanup(stop)
			return addr, stop
		}
		lastErr = err
	}
	t.Fatalf("starting %s: %v", filepath.Base(bin), lastErr)
	return "", nil
}

// startProcess runs bin args in dir and waits (5 s) until ping answers; stop kills it
// (SIGKILL) and waits for it, and may be called more than once.
func startProcess(t testing.TB, dir, bin string, args []string, ping func(context.Context) error) (func(), error) {
	var out strings.Builder
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out // one writer: exec copies both through one pipe
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := ping(ctx)
		cancel()
		if err == nil {
			return stop, nil
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("%s exited: %s", filepath.Base(bin), out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("%s did not answer PING: %v", filepath.Base(bin), err)
		}
	}
}

// waitUntil polls cond (each call bounded to 1 s) for up to 20 s.
func waitUntil(t testing.TB, what string, cond func(context.Context) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ok := cond(ctx)
		cancel()
		if ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// Client is a plain client of one Redis at addr (no retries), for a test's own checks.
func Client(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
}
