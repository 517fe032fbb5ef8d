package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

func TestArgumentHashKey(t *testing.T) {
	long := strings.Repeat("k", minHashKeyBytes)
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	store := func(typ, path string) *config.Config {
		c := &config.Config{}
		c.Tasks.Store.Type, c.Tasks.Store.Path = typ, path
		return c
	}
	none := env(nil)

	if k, err := argumentHashKey(store(config.StoreMemory, ""), none); err != nil || k != nil {
		t.Errorf("memory without a key: %q, %v; want nil (a random key per process)", k, err)
	}
	if k, err := argumentHashKey(store(config.StoreRedis, ""), env(map[string]string{config.EnvArgumentHashKey: long})); err != nil || string(k) != long {
		t.Errorf("redis with a key: %q, %v", k, err)
	}
	if _, err := argumentHashKey(store(config.StoreRedis, ""), none); err == nil || !strings.Contains(err.Error(), config.EnvArgumentHashKey) {
		t.Errorf("redis without a key must fail naming %s: %v", config.EnvArgumentHashKey, err)
	}
	if _, err := argumentHashKey(store(config.StoreMemory, ""), env(map[string]string{config.EnvArgumentHashKey: "short"})); err == nil {
		t.Error("a short key was accepted")
	}

	// File store: a key is made once, kept private, and read back on the next start.
	path := filepath.Join(t.TempDir(), "tasks.db")
	first, err := argumentHashKey(store(config.StoreFile, path), none)
	if err != nil || len(first) < minHashKeyBytes {
		t.Fatalf("file store: %q, %v", first, err)
	}
	fi, err := os.Stat(path + ".key")
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v; want mode 0600", fi, err)
	}
	again, err := argumentHashKey(store(config.StoreFile, path), none)
	if err != nil || string(again) != string(first) {
		t.Errorf("second start read %q, %v; want the same key", again, err)
	}
	if err := os.WriteFile(path+".key", []byte("tiny\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := argumentHashKey(store(config.StoreFile, path), none); err == nil {
		t.Error("a truncated key file was accepted")
	}
}

// TestOwnerKey: the owner hash key is never public nor empty; it follows the store's life
// (kept for the file store, shared by Redis replicas through the arguments key they share,
// per process for memory), and TOLLGATE_OWNER_HASH_KEY overrides it.
func TestOwnerKey(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	none := env(nil)
	if got := ownerKey(env(map[string]string{config.EnvOwnerHashKey: "set"}), []byte("arg")); got != "set" {
		t.Errorf("with %s: %q", config.EnvOwnerHashKey, got)
	}
	a, b := ownerKey(none, nil), ownerKey(none, nil)
	if a == "" || a == b {
		t.Errorf("memory store: %q then %q; want a random key per process", a, b)
	}

	path := filepath.Join(t.TempDir(), "tasks.db")
	c := &config.Config{}
	c.Tasks.Store.Type, c.Tasks.Store.Path = config.StoreFile, path
	argKey, err := argumentHashKey(c, none)
	if err != nil {
		t.Fatal(err)
	}
	first := ownerKey(none, argKey)
	again, err := argumentHashKey(c, none) // the next start
	if err != nil || ownerKey(none, again) != first {
		t.Errorf("file store: owner key changed across a restart (%v)", err)
	}
	if first == "" || strings.Contains(first, string(argKey)) || first == string(argKey) {
		t.Errorf("file store: owner key %q must be derived, not the arguments key", first)
	}
	shared := []byte(strings.Repeat("r", minHashKeyBytes)) // TOLLGATE_ARGUMENT_HASH_KEY of two Redis replicas
	if ownerKey(none, shared) != ownerKey(none, shared) {
		t.Error("redis replicas sharing the arguments key got different owner keys")
	}
}
