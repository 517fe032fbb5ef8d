package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// openedStore is the task store the server runs on, what it resolved to, and — when tasks
// will not survive a restart although nobody chose that — the warning /readyz repeats.
type openedStore struct {
	store.Store
	cfg     config.Store // Type is never auto here; Path is absolute for the file store
	warning string
}

// openStore opens the store tasks.store selects. An explicit type opens exactly that (and
// fails loudly). The default, auto, prefers the file store so pending approvals survive a
// restart: at <data dir>/tasks.db when $TOLLGATE_DATA_DIR or tasks.store.path names it,
// otherwise in the first writable per-user or system state directory; with none writable it
// falls back to memory, logs a WARN and keeps a warning for /readyz.
func openStore(cfg *config.Config, lookupEnv func(string) (string, bool), log *slog.Logger) (*openedStore, error) {
	c := resolveStorePaths(cfg)
	if c.Type != config.StoreAuto {
		st, err := store.Open(c, lookupEnv)
		if errors.Is(err, store.ErrCorrupt) {
			return nil, fmt.Errorf("tasks.store: %w; move the file aside (keep it for inspection) to start with an empty store", err)
		}
		if err != nil {
			return nil, fmt.Errorf("tasks.store: %w", err)
		}
		logSkipped(log, st)
		if c.Sentinel.MasterName != "" {
			log.Info("task store", "type", c.Type, "sentinel_master", c.Sentinel.MasterName, "sentinels", strings.Join(c.Sentinel.Addresses, ","), "why", "tasks.store.type: "+c.Type)
		} else {
			log.Info("task store", "type", c.Type, "path", c.Path, "why", "tasks.store.type: "+c.Type)
		}
		if r, ok := st.(*store.Redis); ok {
			warnPersistence(r, log)
		}
		return &openedStore{Store: st, cfg: c}, nil
	}

	candidates, why := autoCandidates(cfg, c.Path, lookupEnv)
	var problems []string
	for _, path := range candidates {
		if err := probeDir(filepath.Dir(path)); err != nil {
			problems = append(problems, err.Error())
			continue
		}
		f, err := store.OpenFile(path)
		if errors.Is(err, store.ErrCorrupt) {
			return corruptToMemory(path, err, log), nil
		}
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		logSkipped(log, f)
		log.Info("task store", "type", config.StoreFile, "path", path, "why", "tasks.store.type auto: "+why)
		return &openedStore{Store: f, cfg: config.Store{Type: config.StoreFile, Path: path}}, nil
	}
	warning := memoryWarning(problems)
	log.Warn("task store: MEMORY ONLY", "why", warning)
	return &openedStore{Store: store.NewMemory(), cfg: config.Store{Type: config.StoreMemory}, warning: warning}, nil
}

// resolveStorePaths is tasks.store with its paths (store file, TLS files) resolved against
// the config file's directory.
func resolveStorePaths(cfg *config.Config) config.Store {
	c := cfg.Tasks.Store
	for _, p := range []*string{&c.Path, &c.TLS.CAFile, &c.TLS.CertFile, &c.TLS.KeyFile} {
		if *p != "" {
			*p = cfg.ResolvePath(*p)
		}
	}
	return c
}

// autoCandidates lists the store files auto tries, in order, and why those (path is
// tasks.store.path resolved against the config file).
func autoCandidates(cfg *config.Config, path string, lookupEnv func(string) (string, bool)) (candidates []string, why string) {
	switch {
	case path != "" && fromDataDir(path, lookupEnv):
		return []string{path}, "$" + config.EnvDataDir
	case path != "":
		return []string{path}, "tasks.store.path"
	}
	name := defaultStoreName(cfg)
	for _, dir := range defaultDataDirs(lookupEnv) {
		candidates = append(candidates, filepath.Join(dir, name))
	}
	return candidates, "the first writable default data directory ($" + config.EnvDataDir + " is unset)"
}

func memoryWarning(problems []string) string {
	return "tasks are kept in memory: pending approvals and task results will not survive a restart (no writable data directory: " +
		strings.Join(problems, "; ") + "); set $" + config.EnvDataDir + " to a writable directory, or tasks.store.type: memory to choose this"
}

// CheckStore says, without creating or opening anything, what openStore would make of
// tasks.store (tollgate validate): an error where the start would fail (a file store whose
// directory or file cannot be written, a Redis URL that does not parse), a warning where auto
// would fall back to memory. It does not connect to Redis.
func CheckStore(cfg *config.Config, lookupEnv func(string) (string, bool)) (warning string, err error) {
	c := resolveStorePaths(cfg)
	switch c.Type {
	case config.StoreFile:
		if err := checkStoreFile(c.Path); err != nil {
			return "", fmt.Errorf("tasks.store: file task store: %w", err)
		}
	case config.StoreRedis:
		if err := store.CheckRedisConfig(store.RedisConfigOf(c, lookupEnv)); err != nil {
			return "", fmt.Errorf("tasks.store: %w", err)
		}
	case config.StoreAuto:
		candidates, _ := autoCandidates(cfg, c.Path, lookupEnv)
		var problems []string
		for _, path := range candidates {
			err := checkStoreFile(path)
			if err == nil {
				return "", nil
			}
			problems = append(problems, err.Error())
		}
		return memoryWarning(problems), nil
	}
	return "", nil
}

// checkStoreFile reports whether a store file could be created or opened for writing at path.
func checkStoreFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("%s: not a regular file", path)
	case err == nil:
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("%s: not writable: %w", path, unwrapPath(err))
		}
		return f.Close()
	}
	if derr := writableDir(filepath.Dir(path)); derr != nil {
		return derr
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", path, unwrapPath(err))
	}
	return nil
}

// writableDir reports whether dir could be made (if missing) and a file created in it, by
// probing its nearest existing ancestor; it creates no directory.
func writableDir(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) && filepath.Dir(d) != d {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", d, unwrapPath(err))
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s: not a directory", d)
		}
		return probeWrite(d)
	}
}

// corruptToMemory is auto's answer to a corrupt store file: starting on it would crash (bbolt
// panics on bad pages) at every start, and starting on a fresh file in its place would bury
// the evidence. The file is renamed <path>.corrupt-<UTC time> for inspection and Tollgate runs
// on memory, loudly: a WARN and the degraded: line of /readyz.
func corruptToMemory(path string, cause error, log *slog.Logger) *openedStore {
	aside := path + ".corrupt-" + time.Now().UTC().Format("20060102T150405Z")
	moved := "moved aside to " + aside
	if err := os.Rename(path, aside); err != nil {
		moved = "could not be moved aside: " + unwrapPath(err).Error()
	}
	warning := "tasks are kept in memory: pending approvals and task results will not survive a restart (the task store " + path +
		" is corrupt and was " + moved + ": " + cause.Error() + "); restore it from a backup or remove it, then restart"
	log.Error("task store: the store file is corrupt", "path", path, "moved", moved, "error", cause)
	log.Warn("task store: MEMORY ONLY", "why", warning)
	return &openedStore{Store: store.NewMemory(), cfg: config.Store{Type: config.StoreMemory}, warning: warning}
}

// logSkipped reports stored records a file store could not decode and left out (never their
// ids: a task id can be its caller's capability).
func logSkipped(log *slog.Logger, st store.Store) {
	if f, ok := st.(*store.File); ok && f.Skipped() > 0 {
		log.Error("task store: undecodable records skipped", "count", f.Skipped())
	}
}

// fromDataDir reports whether path is the store file $TOLLGATE_DATA_DIR gave (config.applyEnv).
func fromDataDir(path string, lookupEnv func(string) (string, bool)) bool {
	dir, ok := lookupEnv(config.EnvDataDir)
	return ok && dir != "" && path == filepath.Join(dir, config.DefaultStoreFileName)
}

// defaultDataDirs are where the store goes when no data directory is configured: the
// per-user state directory (XDG Base Directory: $XDG_STATE_HOME, default ~/.local/state) for a
// laptop, then /var/lib/tollgate for a server or a container with a volume there.
func defaultDataDirs(lookupEnv func(string) (string, bool)) []string {
	var dirs []string
	if v, ok := lookupEnv("XDG_STATE_HOME"); ok && filepath.IsAbs(v) {
		dirs = append(dirs, filepath.Join(v, "tollgate"))
	} else if h, ok := lookupEnv("HOME"); ok && filepath.IsAbs(h) && filepath.Clean(h) != "/" {
		dirs = append(dirs, filepath.Join(h, ".local", "state", "tollgate"))
	}
	return append(dirs, filepath.Join("/var", "lib", "tollgate"))
}

// defaultStoreName names the store file in a shared default directory after the upstream:
// every Tollgate a user runs shares that directory, and a task approved for one upstream must
// never be executed against another one after a restart (nor two gateways fight over one
// file lock).
func defaultStoreName(cfg *config.Config) string {
	var url string
	if len(cfg.Sources) > 0 {
		url = cfg.Sources[0].URL
		if src := cfg.Sources[0]; src.Stdio() { // a stdio server is named by its command line
			url = "stdio\x00" + strings.Join(append([]string{src.Command}, src.Args...), "\x00")
		}
	}
	sum := sha256.Sum256([]byte(url))
	return "tasks-" + hex.EncodeToString(sum[:6]) + ".db"
}

// probeDir makes dir (0700) if needed and checks a file can be created in it: a read-only
// root filesystem or a missing volume shows here, before bbolt is asked to open anything.
func probeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%s: %w", dir, unwrapPath(err))
	}
	return probeWrite(dir)
}

// probeWrite creates and removes a file in the existing directory dir.
func probeWrite(dir string) error {
	f, err := os.CreateTemp(dir, ".tollgate-probe-*")
	if err != nil {
		return fmt.Errorf("%s: not writable: %w", dir, unwrapPath(err))
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// unwrapPath drops the *PathError's repetition of the path.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// warnPersistence logs a WARN at start for each thing in the Redis's configuration that loses
// tasks (docs/operations.md "Redis persistence"); an INFO when Redis refuses CONFIG GET.
func warnPersistence(r *store.Redis, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	problems, err := r.PersistenceProblems(ctx)
	if err != nil {
		log.Info("task store: cannot read the Redis persistence settings; make sure they keep tasks (docs/operations.md, Redis persistence)", "error", err.Error())
		return
	}
	for _, p := range problems {
		log.Warn("task store: Redis is not set up to keep tasks: "+p, "fix", "appendonly yes, maxmemory-policy noeviction (docs/operations.md, Redis persistence)")
	}
}
