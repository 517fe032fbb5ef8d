package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
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

// reloadQuiet is how long file-system events must pause before the files are read: editors
// and ConfigMap swaps produce bursts.
const reloadQuiet = 150 * time.Millisecond

// maxConfigRead bounds one read of a config or policy file (as config.Load does).
const maxConfigRead = 16 << 20

// Reloader rebuilds the snapshot when the config file or a Cedar file changes: on file-system
// events (a Kubernetes ConfigMap update swaps the ..data symlink in the watched directory), on
// Reload() (SIGHUP), and when a periodic content hash differs.
//
// A file read while a writer is part-way through can itself be valid and govern less (the
// rules after the cut are missing), so a change is used only once it is complete by the
// measures of server.reload: the files read the same byte for byte after settle, a change
// that weakens governance (config.Weakens, or changed Cedar files) waits until the files
// have been unchanged for weaker_settle (SIGHUP: the operator says the file is complete, so
// settle only), and with end_marker set the config file must end with that line.
type Reloader struct {
	s       *Server
	path    string
	trigger chan struct{}
	hash    string         // content of the running configuration (config file and policy files)
	cedar   string         // content of the running Cedar files alone
	base    *config.Config // the config the process started with (restart-only settings)
	pending *pendingChange // a change read but not yet applied
	wake    func(time.Duration)
	now     func() time.Time
}

// pendingChange is content seen on disk that differs from the running configuration.
type pendingChange struct {
	sum      string
	seen     time.Time // first read with this content
	explicit bool      // a SIGHUP (Reload) asked for it
	why      string
	noted    string // the wait last logged, so each is logged once
}

// fileState is one read of the config file and the policy files it names.
type fileState struct {
	sum, cedar string
	cfg        *config.Config
	err        error
	data       []byte    // the config file
	modified   time.Time // latest modification time among the files
}

func newReloader(s *Server, cfg *config.Config) *Reloader {
	r := &Reloader{s: s, path: cfg.Path, trigger: make(chan struct{}, 1), base: cfg, now: time.Now, wake: func(time.Duration) {}}
	r.hash, r.cedar = contentHash(cfg)
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
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	r.wake = func(d time.Duration) { timer.Reset(max(d, time.Millisecond)) }
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			if r.relevant(ev.Name) {
				r.wake(reloadQuiet)
			}
		case err := <-errs:
			r.s.log.Warn("file watcher error", "error", err.Error())
		case <-timer.C:
			r.check(false, "change")
		case <-poll.C:
			if r.path != "" {
				r.check(false, "change")
			}
		case <-r.trigger:
			r.check(true, "signal")
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

// check reads the files and applies them once they are complete (see Reloader); otherwise it
// asks to be woken when they may be. explicit is a SIGHUP: it also re-applies unchanged files.
func (r *Reloader) check(explicit bool, why string) {
	if r.path == "" { // config from bytes: nothing to read again
		if explicit {
			r.s.log.Info("reload requested but the configuration was not read from a file")
		}
		return
	}
	st := r.read()
	if st.sum == r.hash {
		r.pending = nil
		if explicit {
			if st.err != nil {
				r.fail(st.err)
			} else {
				r.apply(st, "signal")
			}
		}
		return
	}
	now := r.now()
	rc := r.running().Server.Reload
	p := r.pending
	if p == nil || p.sum != st.sum {
		// First sight of this content: read it again after settle; it must not have changed.
		r.pending = &pendingChange{sum: st.sum, seen: now, explicit: explicit, why: why}
		r.wake(rc.Settle.D())
		return
	}
	p.explicit = p.explicit || explicit
	if left := rc.Settle.D() - now.Sub(p.seen); left > 0 {
		r.wake(left)
		return
	}
	if st.err != nil {
		r.pending, r.hash = nil, st.sum // reported once per content
		r.fail(st.err)
		return
	}
	if m := endMarker(r.running(), st.cfg); m != "" && lastLine(st.data) != m {
		r.note(p, "config file does not end with server.reload.end_marker yet; keeping the previous configuration until it does", "end_marker", m)
		return // the next change (event or poll) looks again
	}
	if !p.explicit {
		weaker := config.Weakens(r.running(), st.cfg)
		if st.cedar != r.cedar {
			weaker = append(weaker, "cedar policy content changed")
		}
		stable := p.seen
		if st.modified.After(stable) && !st.modified.After(now) {
			stable = st.modified
		}
		if left := rc.WeakerSettle.D() - now.Sub(stable); len(weaker) > 0 && left > 0 {
			r.note(p, "configuration change weakens governance; applying it once the files have been unchanged for server.reload.weaker_settle (send SIGHUP to apply a complete file now)",
				"weaker_settle", rc.WeakerSettle.D().String(), "changes", weaker)
			r.wake(left)
			return
		}
	}
	r.pending = nil
	r.apply(st, p.why)
}

// note logs a wait once per pending content.
func (r *Reloader) note(p *pendingChange, msg string, args ...any) {
	if p.noted == msg {
		return
	}
	p.noted = msg
	r.s.log.Info(msg, append([]any{"path", r.path}, args...)...)
}

func (r *Reloader) running() *config.Config { return r.s.snaps.Load().Config }

// endMarker is the line the config file must end with: the running configuration's, else
// the new one's (a file that turns the marker on is held to it at once).
func endMarker(running, next *config.Config) string {
	if m := running.Server.Reload.EndMarker; m != "" {
		return m
	}
	return next.Server.Reload.EndMarker
}

// lastLine is the file's last non-blank line, trimmed.
func lastLine(b []byte) string {
	b = bytes.TrimRight(b, " \t\r\n")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return string(bytes.TrimSpace(b))
}

// read reads the config file, parses exactly those bytes, then reads the policy files it names.
func (r *Reloader) read() fileState {
	var st fileState
	h, ch := sha256.New(), sha256.New()
	data, mod, err := readBounded(r.path)
	st.modified = mod
	h.Write(data)
	st.data = data
	if err != nil {
		st.err = err
	} else {
		st.cfg, st.err = config.Parse(data, r.path, r.s.opts.LookupEnv)
	}
	if st.cfg != nil {
		for _, p := range policyFiles(st.cfg) {
			b, m, _ := readBounded(p)
			h.Write([]byte{0})
			h.Write(b)
			ch.Write([]byte{0})
			ch.Write(b)
			if m.After(st.modified) {
				st.modified = m
			}
		}
	}
	st.sum, st.cedar = hex.EncodeToString(h.Sum(nil)), hex.EncodeToString(ch.Sum(nil))
	return st
}

func policyFiles(cfg *config.Config) []string {
	var out []string
	for _, p := range cfg.Cedar.Policies {
		out = append(out, cfg.ResolvePath(p))
	}
	if cfg.Cedar.Schema != "" {
		out = append(out, cfg.ResolvePath(cfg.Cedar.Schema))
	}
	return out
}

func readBounded(path string) ([]byte, time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer f.Close()
	var mod time.Time
	if fi, err := f.Stat(); err == nil {
		mod = fi.ModTime()
	}
	b, err := io.ReadAll(io.LimitReader(f, maxConfigRead+1))
	if err == nil && len(b) > maxConfigRead {
		err = io.ErrShortBuffer
	}
	return b, mod, err
}

func (r *Reloader) fail(err error) {
	r.s.metrics.Reloaded(false)
	r.s.log.Error("config reload failed; keeping the previous configuration", "path", r.path, "error", err.Error())
}

func (r *Reloader) apply(st fileState, why string) {
	r.hash = st.sum
	cfg := st.cfg
	snap, err := governance.Build(cfg, nil)
	if err != nil {
		r.fail(err)
		return
	}
	// Build read the policy files again: they must still be what was checked.
	if again := r.read(); again.sum != st.sum {
		r.hash = ""
		r.wake(reloadQuiet)
		return
	}
	// Policies checked against the upstream's tools as last listed (cedar.validation);
	// strict refuses a reload whose policies do not match, like any bad configuration.
	var check *governance.PolicyCheck
	if lt := r.s.ann.Listed(); lt != nil {
		r.s.policyCheckMu.Lock()
		check = snap.CheckPolicies(lt.Tools, lt.Digest)
		r.s.policyCheckMu.Unlock()
		if err := check.Err(); err != nil && cfg.Cedar.Validation == config.ValidationStrict {
			r.fail(err)
			return
		}
	}
	tokens, err := cfg.ApproverTokens(r.s.opts.LookupEnv)
	if err != nil {
		r.fail(err)
		return
	}
	for _, p := range config.RestartRequired(r.base, cfg) {
		r.s.log.Warn("setting changed but needs a restart to take effect", "path", p)
	}
	r.cedar = st.cedar
	prev := r.s.snaps.Load().PolicyCheck()
	r.s.snaps.Store(snap)
	if check != nil || prev != nil {
		r.s.reportPolicyCheck(snap, prev, check)
	}
	r.s.checkPolicies(snap) // tools listed while this reload was being checked
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

// contentHash covers the config file and every policy file it names (as read does), and
// the policy files alone.
func contentHash(cfg *config.Config) (all, cedar string) {
	h, ch := sha256.New(), sha256.New()
	if cfg.Path != "" {
		b, _, _ := readBounded(cfg.Path)
		h.Write(b)
	}
	for _, p := range policyFiles(cfg) {
		b, _, _ := readBounded(p)
		h.Write([]byte{0})
		h.Write(b)
		ch.Write([]byte{0})
		ch.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), hex.EncodeToString(ch.Sum(nil))
}
