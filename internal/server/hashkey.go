package server

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// minHashKeyBytes is the shortest TOLLGATE_ARGUMENT_HASH_KEY accepted (256 bits as text is 64
// hex digits; 32 bytes of any text is the floor).
const minHashKeyBytes = 32

// argumentHashKey returns the key of the tasks' arguments hash (tasks.CanonicalHash), which
// binds an approval to the exact call. It must outlive the process wherever tasks do:
//
//   - $TOLLGATE_ARGUMENT_HASH_KEY when set (at least 32 bytes), for any store;
//   - memory store: nil, so the task manager draws a random key for this process;
//   - file store: a random key kept in <store path>.key (mode 0600), made on first start;
//   - Redis store: the variable is required — replicas must share the key, and deriving it
//     from anything in Redis would hand it to whoever can write there.
func argumentHashKey(cfg *config.Config, lookupEnv func(string) (string, bool)) ([]byte, error) {
	if v, ok := lookupEnv(config.EnvArgumentHashKey); ok && v != "" {
		if len(v) < minHashKeyBytes {
			return nil, fmt.Errorf("%s must be at least %d bytes (e.g. openssl rand -hex 32)", config.EnvArgumentHashKey, minHashKeyBytes)
		}
		return []byte(v), nil
	}
	switch cfg.Tasks.Store.Type {
	case config.StoreRedis:
		return nil, fmt.Errorf("tasks.store.type redis needs %s: the same secret of at least %d bytes on every replica (e.g. openssl rand -hex 32), so a task approved on one replica can be verified on another and a Redis writer cannot forge it",
			config.EnvArgumentHashKey, minHashKeyBytes)
	case config.StoreFile:
		return fileHashKey(cfg.ResolvePath(cfg.Tasks.Store.Path) + ".key")
	}
	return nil, nil
}

// fileHashKey reads the key kept beside the file store, making it on first use.
func fileHashKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		raw := make([]byte, 32)
		_, _ = rand.Read(raw)
		key := hex.EncodeToString(raw)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return fileHashKey(path) // made concurrently; use that one
		}
		if err != nil {
			return nil, fmt.Errorf("creating the arguments hash key %s: %w", path, err)
		}
		if _, err := f.WriteString(key + "\n"); err != nil {
			f.Close()
			return nil, fmt.Errorf("writing the arguments hash key %s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("writing the arguments hash key %s: %w", path, err)
		}
		return []byte(key), nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the arguments hash key %s: %w", path, err)
	}
	key := strings.TrimSpace(string(b))
	if len(key) < minHashKeyBytes {
		return nil, fmt.Errorf("the arguments hash key %s is shorter than %d bytes", path, minHashKeyBytes)
	}
	return []byte(key), nil
}

// ownerKey returns the key of the hash under which a 2026-07-28 caller's Authorization
// credential owns its tasks, and of the owner hashes shown to approvers, webhooks and the
// audit log (disclose.OwnerHash). A public key would let anyone who sees such a hash check
// guessed credentials or user names offline, so it is always secret:
//
//   - $TOLLGATE_OWNER_HASH_KEY when set;
//   - else derived from the arguments hash key (argKey, from argumentHashKey): the file
//     store's <store path>.key, or $TOLLGATE_ARGUMENT_HASH_KEY, which replicas sharing a
//     Redis store already share — so owners survive a restart and agree across replicas, and
//     nothing is kept in the store a writer could read;
//   - else (memory store) random for this process, as the tasks are.
func ownerKey(lookupEnv func(string) (string, bool), argKey []byte) string {
	if v, ok := lookupEnv(config.EnvOwnerHashKey); ok && v != "" {
		return v
	}
	if len(argKey) == 0 {
		argKey = make([]byte, 32)
		_, _ = rand.Read(argKey) // crypto/rand.Read never fails (Go 1.24)
	}
	mac := hmac.New(sha256.New, argKey)
	mac.Write([]byte("tollgate owner hash key v1"))
	return hex.EncodeToString(mac.Sum(nil))
}
