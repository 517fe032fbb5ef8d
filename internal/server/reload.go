package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/governance"
)

// reloadPollInterval is the content-hash fallback for file systems without notifications.
const reloadPollInterval = 10 * time.Second

// Reloader rebuilds the snapshot when the config file or a Cedar file changes: on file-system
// events (a Kubernetes ConfigMap update swaps the ..data symlink in the watched directory), on
// Reload() (SIGHUP), and when a periodic content hash differs.
type Reloader struct {
	s       *Server
	path    string
	trigger chan struct{}
	hash    string
	base    *config.Config // the config the process started with (restart-only settings)
}

func newReloader(s *Server, cfg *config.Config) *Reloader {
	r := &Reloader{s: s, path: cfg.Path, trigger: make(chan struct{}, 1), base: cfg}
	r.hash = contentHash(cfg)
	return r
}

// Reload asks for a reload (non-blocking).
func (s *Server) Reload() {
	select {
	case s.reloader.trigger <- struct{}{}:
	default:
	}
}

// Run watches until ctx ends. Without a config file path (config from bytes) it only serves
// Reload() requests.
func (r *Reloader) Run(ctx context.Context) {
	var events <-chan fsnotify.Event
	var errs <-chan error
	if r.path != "" {
		if w, err := fsnotify.NewWatcher(); err != nil {
			r.s.log.Warn("file watching unavailable; relying on SIGHUP and periodic checks", "error", err.Error())
		} else {
			defer w.Close()
			for _, d := range r.watchDirs() {
				if err := w.Add(d); err != nil {
					r.s.log.Warn("cannot watch directory", "dir", d, "error", err.Error())
				}
			}
			events, errs = w.Events, w.Errors
		}
	}
	poll := time.NewTicker(reloadPollInterval)
	defer poll.Stop()
	var debounce *time.Timer
	var debounceC <-chan time.Time
	defer func() {
		if debounce != nil {
			debounce.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			if !r.relevant(ev.Name) {
				continue
			}
			// Editors and ConfigMap swaps produce bursts; settle first.
			if debounce == nil {
				debounce = time.NewTimer(150 * time.Millisecond)
			} else {
				debounce.Reset(150 * time.Millisecond)
			}
			debounceC = debounce.C
		case err := <-errs:
			r.s.log.Warn("file watcher error", "error", err.Error())
		case <-debounceC:
			debounceC = nil
			r.reloadIfChanged()
		case <-poll.C:
			if r.path != "" {
				r.reloadIfChanged()
			}
		case <-r.trigger:
			r.reload("signal")
		}
	}
}

// watchDirs are the directories of the config file and of every policy file.
func (r *Reloader) watchDirs() []string {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		d := filepath.Dir(p)
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	add(r.path)
	cfg := r.s.snaps.Load().Config
	for _, p := range cfg.Cedar.Policies {
		add(cfg.ResolvePath(p))
	}
	if cfg.Cedar.Schema != "" {
		add(cfg.ResolvePath(cfg.Cedar.Schema))
	}
	return out
}

func (r *Reloader) relevant(name string) bool {
	base := filepath.Base(name)
	if base == "..data" || strings.HasPrefix(base, "..") {
		return true // Kubernetes atomic writer
	}
	if filepath.Clean(name) == filepath.Clean(r.path) {
		return true
	}
	return strings.HasSuffix(base, ".cedar") || strings.HasSuffix(base, ".cedarschema") ||
		strings.HasSuffix(base, ".yaml") || strings.HasSuffix(base, ".yml") || strings.HasSuffix(base, ".json")
}

func (r *Reloader) reloadIfChanged() {
	cur, err := config.Load(r.path, r.s.opts.LookupEnv)
	if err != nil {
		// Report through the normal path so the failure is logged and counted once per change.
		if h := rawHash(r.path); h != r.hash {
			r.hash = h
			r.fail(err)
		}
		return
	}
	if h := contentHash(cur); h != r.hash {
		r.apply(cur, "change")
	}
}

func (r *Reloader) reload(why string) {
	cfg, err := config.Load(r.path, r.s.opts.LookupEnv)
	if err != nil {
		r.fail(err)
		return
	}
	r.apply(cfg, why)
}

func (r *Reloader) fail(err error) {
	r.s.metrics.Reloaded(false)
	r.s.log.Error("config reload failed; keeping the previous configuration", "path", r.path, "error", err.Error())
}

func (r *Reloader) apply(cfg *config.Config, why string) {
	r.hash = contentHash(cfg)
	snap, err := governance.Build(cfg, nil)
	if err != nil {
		r.fail(err)
		return
	}
	tokens, err := cfg.ApproverTokens(r.s.opts.LookupEnv)
	if err != nil {
		r.fail(err)
		return
	}
	for _, p := range config.RestartRequired(r.base, cfg) {
		r.s.log.Warn("setting changed but needs a restart to take effect", "path", p)
	}
	r.s.snaps.Store(snap)
	r.s.approvers.set(tokens)
	r.s.metrics.Reloaded(true)
	changed := r.s.gw.Recompute(snap)
	r.s.log.Info("configuration reloaded", "trigger", why, "revision", snap.Revision, "annotations_changed", len(changed))
	r.s.logAuditMode(snap)
	ctx, cancel := context.WithTimeout(context.Background(), channelCheckTimeout)
	r.s.checkChannels(ctx) // new webhook destinations, removed approvers
	cancel()
	if len(changed) > 0 {
		r.s.notifyListChanged()
	}
}

// contentHash covers the config file and every policy file it names.
func contentHash(cfg *config.Config) string {
	h := sha256.New()
	if cfg.Path != "" {
		b, _ := os.ReadFile(cfg.Path)
		h.Write(b)
	}
	for _, p := range cfg.Cedar.Policies {
		b, _ := os.ReadFile(cfg.ResolvePath(p))
		h.Write([]byte{0})
		h.Write(b)
	}
	if cfg.Cedar.Schema != "" {
		b, _ := os.ReadFile(cfg.ResolvePath(cfg.Cedar.Schema))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func rawHash(path string) string {
	b, _ := os.ReadFile(path)
	s := sha256.Sum256(b)
	return "raw:" + hex.EncodeToString(s[:])
}
