package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
)

// TestRedisTLS: rediss:// to a real redis-server that speaks only TLS, its certificate from a
// private CA (tasks.store.tls.ca_file) and a client certificate required (cert_file,
// key_file). Without the CA, or verifying another name, the connection is refused, and no
// error carries the URL's password.
func TestRedisTLS(t *testing.T) {
	r := storetest.StartTLSRedis(t)
	good := store.RedisConfig{URL: "rediss://" + r.Addr + "/0?key_prefix=tls:", CAFile: r.CAFile, CertFile: r.CertFile, KeyFile: r.KeyFile}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := store.OpenRedisConfig(ctx, good)
	if err != nil {
		t.Fatalf("open over TLS: %v", err)
	}
	defer st.Close()
	if _, err := st.Create(ctx, rrec("tls-1", "alice", true, 3, "abc"), store.Limits{}); err != nil {
		t.Fatalf("create over TLS: %v", err)
	}
	if got, err := st.Get(ctx, "tls-1"); err != nil || string(got.Data) != "abc" {
		t.Fatalf("get over TLS: %v %q", err, got.Data)
	}
	byName := good
	byName.ServerName = "redis.test" // the certificate's DNS name, not the IP dialled
	if st, err := store.OpenRedisConfig(ctx, byName); err != nil {
		t.Errorf("server_name redis.test: %v", err)
	} else {
		_ = st.Close()
	}

	for _, tc := range []struct {
		name string
		mod  func(*store.RedisConfig)
		want string
	}{
		{"system roots do not know the test CA", func(c *store.RedisConfig) { c.CAFile = "" }, "certificate"},
		{"another name", func(c *store.RedisConfig) { c.ServerName = "other.test" }, "certificate"},
		{"no client certificate", func(c *store.RedisConfig) { c.CertFile, c.KeyFile = "", "" }, ""},
		{"plain redis:// with tls keys", func(c *store.RedisConfig) { c.URL = "redis://:s3cret@" + r.Addr }, "use rediss://"},
		{"CA file missing", func(c *store.RedisConfig) { c.CAFile = r.CAFile + ".gone" }, "ca_file"},
		{"CA file not PEM", func(c *store.RedisConfig) { c.CAFile = r.KeyFile }, "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			c.URL = strings.Replace(c.URL, "rediss://", "rediss://:s3cret@", 1) + "&max_retries=-1"
			tc.mod(&c)
			st, err := store.OpenRedisConfig(ctx, c)
			if err == nil {
				_ = st.Close()
				t.Fatal("open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("err = %q, want it to mention %q and no password", err, tc.want)
			}
		})
	}
}

// TestCheckRedisConfig: what tollgate validate says about a Redis config without connecting.
func TestCheckRedisConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    store.RedisConfig
		want string // "" = valid
	}{
		{"one server", store.RedisConfig{URL: "redis://127.0.0.1:6379/0"}, ""},
		{"sentinel without url", store.RedisConfig{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:26379"}}, ""},
		{"sentinel with credentials", store.RedisConfig{URL: "rediss://:pw@/2?key_prefix=x:", MasterName: "m", SentinelAddrs: []string{"127.0.0.1:26379"}}, ""},
		{"sentinel and a host", store.RedisConfig{URL: "redis://:s3cret@redis:6379/0", MasterName: "m", SentinelAddrs: []string{"127.0.0.1:26379"}}, "must name no host"},
		{"sentinel without master", store.RedisConfig{SentinelAddrs: []string{"127.0.0.1:26379"}}, "master name"},
		{"master without sentinels", store.RedisConfig{MasterName: "m"}, "Sentinel address"},
		{"tls keys on plain url", store.RedisConfig{URL: "redis://127.0.0.1:6379", ServerName: "r"}, "use rediss://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := store.CheckRedisConfig(tc.c)
			if (err == nil) != (tc.want == "") || (err != nil && (!strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret"))) {
				t.Errorf("CheckRedisConfig = %v, want %q (and no password)", err, tc.want)
			}
		})
	}
}

// TestRedisSentinelFailover: through the Sentinel (tasks.store.sentinel) the store reaches
// the primary; after the primary is killed (SIGKILL) and the Sentinel promotes the replica,
// the same store object reads what it wrote before (replicated) and writes again, without
// being reopened. Skips without redis-sentinel (runs in CI).
func TestRedisSentinelFailover(t *testing.T) {
	s := storetest.StartSentinel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	st, err := store.OpenRedisConfig(ctx, store.RedisConfig{URL: "redis:///0?key_prefix=sentinel:", MasterName: s.Master, SentinelAddrs: []string{s.Addr}})
	if err != nil {
		t.Fatalf("open through the Sentinel: %v", err)
	}
	defer st.Close()
	if _, err := st.Create(ctx, rrec("before", "alice", true, 3, "one"), store.Limits{}); err != nil {
		t.Fatal(err)
	}
	waitReplicated(t, s, "sentinel:t:before")
	s.KillPrimary()
	s.WaitFailover(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err = st.Create(ctx, rrec("after", "alice", true, 3, "two"), store.Limits{})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("write after the failover: %v", err)
	}
	for _, id := range []string{"before", "after"} {
		if _, err := st.Get(ctx, id); err != nil {
			t.Errorf("get %s after the failover: %v", id, err)
		}
	}
}

// waitReplicated waits until the replica has key (replication is asynchronous).
func waitReplicated(t *testing.T, s *storetest.Sentinel, key string) {
	t.Helper()
	c := storetest.Client(s.Replica)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if n, _ := c.Exists(context.Background(), key).Result(); n == 1 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never reached the replica", key)
}

// TestRedisSentinelPassword: Sentinels that require a password are reached with
// $TOLLGATE_REDIS_SENTINEL_PASSWORD (store.Open with tasks.store.sentinel); without it the
// open fails, and no error carries the password.
func TestRedisSentinelPassword(t *testing.T) {
	s := storetest.StartSentinelWithPassword(t, "s3ntinel-pw")
	cfg := config.Store{Type: "redis", URL: "redis:///0?key_prefix=sentinel-pw:&max_retries=-1",
		Sentinel: config.RedisSentinel{MasterName: s.Master, Addresses: []string{s.Addr}}}
	env := func(pw string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			if k == config.EnvRedisSentinelPassword && pw != "" {
				return pw, true
			}
			return "", false
		}
	}
	st, err := store.Open(cfg, env("s3ntinel-pw"))
	if err != nil {
		t.Fatalf("open with the Sentinel password: %v", err)
	}
	defer st.Close()
	if _, err := st.Create(context.Background(), rrec("pw-1", "alice", true, 1, "x"), store.Limits{}); err != nil {
		t.Fatal(err)
	}
	for _, pw := range []string{"", "wrong-s3ntinel-pw"} {
		st, err := store.Open(cfg, env(pw))
		if err == nil {
			_ = st.Close()
			t.Fatalf("open with Sentinel password %q succeeded", pw)
		}
		if strings.Contains(err.Error(), "s3ntinel-pw") {
			t.Errorf("error carries the password: %v", err)
		}
	}
}
