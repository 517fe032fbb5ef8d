package pins

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/rules"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// Pin is one tool's pin as stored (store.PinRecord.Data): the accepted definition and, when a
// different one was seen since, the newest such candidate. One record per tool however often
// the upstream changes it (Candidate.Changes counts).
type Pin struct {
	Tool       string          `json:"tool"`
	Digest     string          `json:"digest,omitempty"` // accepted ("" = never accepted)
	Definition json.RawMessage `json:"definition,omitempty"`
	AcceptedBy string          `json:"accepted_by,omitempty"`
	AcceptedAt time.Time       `json:"accepted_at,omitzero"`
	Pending    *Candidate      `json:"pending,omitempty"`
}

// Candidate is a definition seen but not accepted.
type Candidate struct {
	Digest     string          `json:"digest"`
	Definition json.RawMessage `json:"definition,omitempty"` // absent when larger than the bound
	Status     string          `json:"status"`               // quarantined | rejected
	Reason     string          `json:"reason"`               // changed | new | too_large
	Size       int             `json:"size"`
	FirstSeen  time.Time       `json:"first_seen"`
	LastSeen   time.Time       `json:"last_seen"`
	Changes    int             `json:"changes"` // different definitions seen since the accepted one
	RejectedBy string          `json:"rejected_by,omitempty"`
}

// Candidate states and reasons.
const (
	StatusQuarantined = "quarantined"
	StatusRejected    = "rejected"
	ReasonChanged     = "changed"
	ReasonNew         = "new"
	ReasonTooLarge    = "too_large"
)

// Errors of Accept and Reject (the admin API maps them).
var (
	ErrNoPending   = errors.New("pins: no definition of this tool awaits a decision")
	ErrStale       = errors.New("pins: the awaiting definition changed since it was shown; look again")
	ErrUnaccepable = errors.New("pins: this definition is larger than governance.pins.max_definition_bytes and cannot be accepted")
)

// entry is a pin as the Keeper holds it.
type entry struct {
	pin     Pin
	version uint64
	hints   rules.Hints // of the accepted definition
}

// blocked reports whether the tool is hidden and refused, given the digest last listed
// ("" = not listed by this process).
func (e *entry) blocked(cur string) bool {
	p := e.pin.Pending
	switch {
	case p == nil:
		return e.pin.Digest == "" // nothing accepted
	case p.Status == StatusQuarantined:
		return true
	default: // rejected: blocked unless the upstream is back to the accepted definition
		return e.pin.Digest == "" || (cur != "" && cur != e.pin.Digest)
	}
}

// Keeper holds the pins of one upstream, backed by the task store. Reads (the listing and
// call paths) are in-memory; a definition that differs from its pin is written to the store
// (compare-and-swap, so replicas agree), and Sync picks up what other replicas wrote.
type Keeper struct {
	st  store.Pins
	cfg config.Pins
	log *slog.Logger

	mu        sync.RWMutex
	pins      map[string]*entry
	cur       map[string]string // tool → digest last listed here
	over      map[string]bool   // quarantined but not stored (max_tools reached, store down)
	bootstrap bool              // trust_first on an empty store: the first listing is accepted

	seenMu sync.Mutex
	seen   map[[32]byte]Seen // SHA-256 of a listed tool's bytes → its Seen (See)

	gen      atomic.Uint64
	onChange atomic.Pointer[func()]
	onEvent  atomic.Pointer[func(Event)]
}

// Event is a quarantine, accept or reject, for the audit log and notifications.
type Event struct {
	Kind   string // quarantined | accepted | rejected
	Tool   string
	Digest string // the new definition's
	Reason string // changed | new | too_large (quarantined)
	By     string // the approver (accepted, rejected)
	// First: this quarantine began with this change (the tool was not already awaiting a
	// decision). A flapping upstream makes one First event per quarantine, however often it
	// changes; notifications are sent for those only (Notify).
	First          bool
	AcceptedDigest string    // the accepted definition's ("" = none, a new tool)
	Changes        int       // different definitions seen since the accepted one (quarantined)
	At             time.Time // when this process made it
	// Diff is what changed (quarantined, First only): bounded by Diff's own bounds; channels
	// render Summary of it.
	Diff []Change
}

// Headline is e in one line of plain text for a message's title (channels escape it).
func (e Event) Headline() string {
	switch {
	case e.Kind == "accepted":
		return "Tool definition accepted by " + e.By + ": the tool is back"
	case e.Kind == StatusRejected:
		return "Tool definition rejected by " + e.By + ": the tool stays refused while the upstream serves it"
	case e.Reason == ReasonNew:
		return "New tool quarantined until an approver accepts it"
	case e.Reason == ReasonTooLarge:
		return "Tool quarantined: its definition is larger than governance.pins.max_definition_bytes"
	}
	return "Tool definition changed: quarantined until an approver accepts it"
}

// Notify reports whether e is announced to the notification channels: every accept and
// reject, and a quarantine's first change only.
func (e Event) Notify() bool { return e.Kind != StatusQuarantined || e.First }

// OnEvent sets fn, called (without locks held) for each quarantine, accept and reject this
// process makes.
func (k *Keeper) OnEvent(fn func(Event)) { k.onEvent.Store(&fn) }

func (k *Keeper) event(e Event) {
	if fn := k.onEvent.Load(); fn != nil {
		(*fn)(e)
	}
}

// New returns a Keeper over st; Load must run before use.
func New(st store.Pins, cfg config.Pins, log *slog.Logger) *Keeper {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Keeper{st: st, cfg: cfg, log: log, pins: map[string]*entry{}, cur: map[string]string{}, over: map[string]bool{},
		seen: map[[32]byte]Seen{}}
}

// OnChange sets fn, called (without locks held) whenever which tools are blocked changes:
// the listing memo is forgotten and clients told (notifications/tools/list_changed).
func (k *Keeper) OnChange(fn func()) { k.onChange.Store(&fn) }

// Gen changes whenever which tools are blocked may have changed; listings key on it.
func (k *Keeper) Gen() uint64 { return k.gen.Load() }

func (k *Keeper) changed() {
	k.gen.Add(1)
	if fn := k.onChange.Load(); fn != nil {
		(*fn)()
	}
}

// Load reads the pins from the store; with mode file it first writes the pin file's
// definitions as accepted (the file, kept in git, is what was reviewed).
func (k *Keeper) Load(ctx context.Context) error {
	if k.cfg.Mode == config.PinsFile {
		f, err := ReadFile(k.cfg.File)
		if err != nil {
			return err
		}
		for _, fp := range f.Tools {
			if err := k.seed(ctx, fp); err != nil {
				return err
			}
		}
	}
	all, err := k.st.ListPins(ctx)
	if err != nil {
		return fmt.Errorf("reading pins from the task store: %w", err)
	}
	k.mu.Lock()
	k.bootstrap = k.cfg.Mode == config.PinsTrustFirst && len(all) == 0
	k.mu.Unlock()
	_, err = k.replace(all)
	return err
}

// seed writes a pin file's definition as tool's accepted one.
func (k *Keeper) seed(ctx context.Context, fp FilePin) error {
	for range 5 {
		var p Pin
		var ver uint64
		rec, err := k.st.GetPin(ctx, fp.Tool)
		switch {
		case err == nil:
			if json.Unmarshal(rec.Data, &p) != nil {
				p = Pin{}
			}
			ver = rec.Version
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("reading pin of tool %q: %w", fp.Tool, err)
		}
		if p.Digest == fp.Digest {
			return nil
		}
		p.Tool, p.Digest, p.Definition, p.AcceptedBy, p.AcceptedAt = fp.Tool, fp.Digest, fp.Definition, "pin file", time.Now().UTC()
		if p.Pending != nil && p.Pending.Digest == fp.Digest {
			p.Pending = nil
		}
		if _, err := k.put(ctx, p, ver); errors.Is(err, store.ErrVersionConflict) {
			continue
		} else if err != nil {
			return fmt.Errorf("writing pin of tool %q: %w", fp.Tool, err)
		}
		return nil
	}
	return fmt.Errorf("writing pin of tool %q: the store kept changing", fp.Tool)
}

// Sync re-reads the pins from the store (another replica accepted, rejected or quarantined).
func (k *Keeper) Sync(ctx context.Context) error {
	all, err := k.st.ListPins(ctx)
	if err != nil {
		return err
	}
	changed, err := k.replace(all)
	if changed {
		k.changed()
	}
	return err
}

// Run syncs every interval until ctx ends.
func (k *Keeper) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := k.Sync(ctx); err != nil && ctx.Err() == nil {
				k.log.Warn("pins not re-read from the task store", "error", err.Error())
			}
		}
	}
}

// replace swaps in the stored pins and reports whether any tool's blocked state changed.
func (k *Keeper) replace(all []store.PinRecord) (bool, error) {
	next := make(map[string]*entry, len(all))
	var bad int
	for _, r := range all {
		var p Pin
		if err := json.Unmarshal(r.Data, &p); err != nil || p.Tool != r.Tool {
			bad++
			continue
		}
		next[r.Tool] = newEntry(p, r.Version)
	}
	k.mu.Lock()
	changed := false
	for name, e := range next {
		old, ok := k.pins[name]
		if !ok || old.version != e.version {
			if !ok || old.blocked(k.cur[name]) != e.blocked(k.cur[name]) || old.pin.Digest != e.pin.Digest {
				changed = true
			}
		}
	}
	for name := range k.pins {
		if _, ok := next[name]; !ok {
			changed = true
		}
	}
	k.pins = next
	k.mu.Unlock()
	if bad > 0 {
		return changed, fmt.Errorf("%d stored pins do not decode", bad)
	}
	return changed, nil
}

func newEntry(p Pin, version uint64) *entry {
	e := &entry{pin: p, version: version}
	if len(p.Definition) > 0 {
		var d struct {
			Annotations json.RawMessage `json:"annotations"`
		}
		if json.Unmarshal(p.Definition, &d) == nil && d.Annotations != nil {
			e.hints = rules.ParseHints(d.Annotations)
		} else {
			e.hints = rules.ParseHints(nil)
		}
	}
	return e
}

// Seen is one listed tool.
type Seen struct {
	Name   string
	Digest string
	Canon  []byte // nil when larger than the bound
	Size   int
}

// See computes a listed tool's pin identity (its canonical definition and digest). Tools
// listed with the same bytes as before are looked up by the SHA-256 of those bytes (a
// collision-resistant key: an upstream cannot make a changed definition look like a seen one),
// which keeps a new page of unchanged tools cheap.
func (k *Keeper) See(tool []byte) (Seen, error) {
	key := sha256.Sum256(tool)
	k.seenMu.Lock()
	s, ok := k.seen[key]
	k.seenMu.Unlock()
	if ok {
		return s, nil
	}
	name, canon, err := Canonical(tool)
	if err != nil {
		return Seen{}, err
	}
	s = Seen{Name: name, Digest: Digest(canon), Size: len(canon)}
	if len(canon) <= k.cfg.MaxDefinitionBytes {
		s.Canon = canon
	}
	k.seenMu.Lock()
	if len(k.seen) >= 2*k.cfg.MaxTools {
		clear(k.seen) // bounded; the next listing refills it
	}
	k.seen[key] = s
	k.seenMu.Unlock()
	return s, nil
}

// Observe records one listing's tools (a page; Refresh passes every page at once) and returns
// the names of those to hide and refuse. A definition unlike its pin is quarantined (one
// record per tool, however often it changes); an unknown tool is pinned or quarantined per
// governance.pins.new_tools.
func (k *Keeper) Observe(ctx context.Context, seen []Seen) map[string]bool {
	blocked := map[string]bool{}
	var slow []Seen
	k.mu.Lock()
	boot := k.bootstrap
	k.bootstrap = false
	for _, s := range seen {
		k.cur[s.Name] = s.Digest
		e := k.pins[s.Name]
		switch {
		case e != nil && e.pin.Digest == s.Digest:
			if e.blocked(s.Digest) {
				blocked[s.Name] = true
			}
		case e != nil && e.pin.Pending != nil && e.pin.Pending.Digest == s.Digest:
			blocked[s.Name] = true // already awaiting a decision (or rejected)
		default:
			slow = append(slow, s)
		}
	}
	if len(k.cur) > 2*k.cfg.MaxTools {
		k.cur = map[string]string{} // bounded: a listing refills it
	}
	k.mu.Unlock()
	if len(slow) == 0 {
		return blocked
	}
	changed := false
	for _, s := range slow {
		b, ch := k.record(ctx, s, boot)
		if b {
			blocked[s.Name] = true
		}
		changed = changed || ch
	}
	if changed {
		k.changed()
	}
	return blocked
}

// record writes what one tool's new definition means; it reports whether the tool is blocked
// and whether any blocked state changed.
func (k *Keeper) record(ctx context.Context, s Seen, boot bool) (blocked, changed bool) {
	now := time.Now().UTC()
	for range 3 {
		k.mu.RLock()
		e := k.pins[s.Name]
		k.mu.RUnlock()
		var p Pin
		var ver uint64
		if e != nil {
			p, ver = e.pin, e.version
			if p.Pending != nil {
				c := *p.Pending
				p.Pending = &c
			}
		}
		switch {
		case e != nil && p.Digest == s.Digest:
			return e.blocked(s.Digest), false // another replica caught up meanwhile
		case e != nil && p.Pending != nil && p.Pending.Digest == s.Digest:
			return true, false
		}
		accept := s.Canon != nil && e == nil && (boot || k.cfg.NewTools == config.PinsAccept)
		if accept {
			p = Pin{Tool: s.Name, Digest: s.Digest, Definition: s.Canon, AcceptedBy: "first sight", AcceptedAt: now}
		} else {
			p.Tool = s.Name
			c := &Candidate{Digest: s.Digest, Definition: s.Canon, Status: StatusQuarantined, Reason: ReasonChanged,
				Size: s.Size, FirstSeen: now, LastSeen: now, Changes: 1}
			if p.Digest == "" {
				c.Reason = ReasonNew
			}
			if s.Canon == nil {
				c.Reason = ReasonTooLarge
			}
			if old := p.Pending; old != nil {
				c.FirstSeen, c.Changes = old.FirstSeen, old.Changes+1
				if old.Status == StatusRejected {
					c.FirstSeen = now // a new quarantine after a rejection
				}
			}
			p.Pending = c
		}
		first := e == nil || e.pin.Pending == nil || e.pin.Pending.Status != StatusQuarantined
		ne, err := k.put(ctx, p, ver)
		var q *store.QuotaError
		switch {
		case errors.Is(err, store.ErrVersionConflict):
			if r, gerr := k.st.GetPin(ctx, s.Name); gerr == nil {
				var sp Pin
				if json.Unmarshal(r.Data, &sp) == nil {
					k.mu.Lock()
					k.pins[s.Name] = newEntry(sp, r.Version)
					k.mu.Unlock()
				}
			}
			continue
		case errors.As(err, &q), err != nil:
			// Not stored (max_tools reached, store away): hidden here, fail closed.
			k.log.Warn("tool quarantined without a stored pin", "tool", s.Name, "error", err.Error())
			k.mu.Lock()
			first := !k.over[s.Name]
			if first && len(k.over) < k.cfg.MaxTools {
				k.over[s.Name] = true
			}
			k.mu.Unlock()
			return true, first
		}
		if !accept {
			k.log.Warn("tool quarantined: its definition is not the accepted one", "tool", s.Name,
				"reason", p.Pending.Reason, "digest", s.Digest, "accepted_digest", p.Digest, "changes", p.Pending.Changes)
			ev := Event{Kind: StatusQuarantined, Tool: s.Name, Digest: s.Digest, Reason: p.Pending.Reason,
				First: first, AcceptedDigest: p.Digest, Changes: p.Pending.Changes, At: now}
			if first {
				ev.Diff = Diff(p.Definition, s.Canon) // once per quarantine: bounded work when flapping
			}
			k.event(ev)
		}
		k.mu.Lock()
		k.pins[s.Name] = ne
		delete(k.over, s.Name)
		k.mu.Unlock()
		return !accept, !accept
	}
	return true, false // the store kept changing: blocked until it settles
}

// put writes p with compare-and-swap on ver and returns the new entry.
func (k *Keeper) put(ctx context.Context, p Pin, ver uint64) (*entry, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	r, err := k.st.PutPin(ctx, store.PinRecord{Tool: p.Tool, Data: b}, ver, k.cfg.MaxTools)
	if err != nil {
		return nil, err
	}
	return newEntry(p, r.Version), nil
}

// Blocked reports whether tool is hidden and its calls refused (or held), from what this
// process knows.
func (k *Keeper) Blocked(tool string) bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.over[tool] {
		return true
	}
	e := k.pins[tool]
	return e != nil && e.blocked(k.cur[tool])
}

// Known reports whether tool's definition was ever seen in a listing (pinned, awaiting a
// decision, or refused as over the bounds).
func (k *Keeper) Known(tool string) bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.over[tool] || k.pins[tool] != nil
}

// QuarantinesNew reports whether a tool first seen after the first listing is quarantined
// (governance.pins.new_tools: quarantine).
func (k *Keeper) QuarantinesNew() bool { return k.cfg.NewTools == config.PinsQuarantine }

// Accepted returns the digest and annotation hints of tool's accepted definition.
func (k *Keeper) Accepted(tool string) (digest string, hints rules.Hints, ok bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	e := k.pins[tool]
	if e == nil || e.pin.Digest == "" {
		return "", 0, false
	}
	return e.pin.Digest, e.hints, true
}

// Awaiting returns the digest of tool's definition awaiting a decision ("" = none).
func (k *Keeper) Awaiting(tool string) string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if e := k.pins[tool]; e != nil && e.pin.Pending != nil && e.pin.Pending.Status == StatusQuarantined {
		return e.pin.Pending.Digest
	}
	return ""
}

// Quarantined counts the tools awaiting a decision (tollgate_tools_quarantined).
func (k *Keeper) Quarantined() int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	n := len(k.over)
	for _, e := range k.pins {
		if e.pin.Pending != nil && e.pin.Pending.Status == StatusQuarantined {
			n++
		}
	}
	return n
}

// Review is a pin awaiting a decision, as the admin API shows it.
type Review struct {
	Tool           string    `json:"tool"`
	Status         string    `json:"status"`
	Reason         string    `json:"reason"`
	AcceptedDigest string    `json:"accepted_digest,omitempty"`
	Digest         string    `json:"digest"`
	FirstSeen      time.Time `json:"first_seen"`
	LastSeen       time.Time `json:"last_seen"`
	Changes        int       `json:"changes"`
	Size           int       `json:"size"`
	Diff           []Change  `json:"diff"`
}

// Reviews lists the tools awaiting a decision (and the rejected ones), read from the store.
func (k *Keeper) Reviews(ctx context.Context) ([]Review, error) {
	all, err := k.st.ListPins(ctx)
	if err != nil {
		return nil, err
	}
	out := []Review{}
	for _, r := range all {
		var p Pin
		if json.Unmarshal(r.Data, &p) != nil || p.Pending == nil {
			continue
		}
		c := p.Pending
		out = append(out, Review{Tool: p.Tool, Status: c.Status, Reason: c.Reason, AcceptedDigest: p.Digest, Digest: c.Digest,
			FirstSeen: c.FirstSeen, LastSeen: c.LastSeen, Changes: c.Changes, Size: c.Size, Diff: Diff(p.Definition, c.Definition)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool < out[j].Tool })
	return out, nil
}

// Accept makes tool's awaiting definition (digest, as shown to the approver) the accepted one.
func (k *Keeper) Accept(ctx context.Context, tool, digest, by string) (Pin, error) {
	return k.decide(ctx, tool, digest, Event{Kind: "accepted", Tool: tool, Digest: digest, By: by, At: time.Now().UTC()}, func(p *Pin) error {
		c := p.Pending
		if c.Definition == nil {
			return ErrUnaccepable
		}
		p.Digest, p.Definition, p.AcceptedBy, p.AcceptedAt, p.Pending = c.Digest, c.Definition, by, time.Now().UTC(), nil
		return nil
	})
}

// Reject keeps tool's accepted definition: the rejected one stays refused while the upstream
// serves it; the tool is back when the upstream returns to the accepted definition.
func (k *Keeper) Reject(ctx context.Context, tool, digest, by string) (Pin, error) {
	return k.decide(ctx, tool, digest, Event{Kind: StatusRejected, Tool: tool, Digest: digest, By: by, At: time.Now().UTC()}, func(p *Pin) error {
		p.Pending.Status, p.Pending.RejectedBy = StatusRejected, by
		return nil
	})
}

func (k *Keeper) decide(ctx context.Context, tool, digest string, ev Event, f func(*Pin) error) (Pin, error) {
	for range 5 {
		r, err := k.st.GetPin(ctx, tool)
		if errors.Is(err, store.ErrNotFound) {
			return Pin{}, ErrNoPending
		}
		if err != nil {
			return Pin{}, err
		}
		var p Pin
		if err := json.Unmarshal(r.Data, &p); err != nil {
			return Pin{}, fmt.Errorf("pin of tool %q does not decode: %w", tool, err)
		}
		if p.Pending == nil || p.Pending.Status != StatusQuarantined {
			return Pin{}, ErrNoPending
		}
		if digest != p.Pending.Digest {
			return Pin{}, ErrStale
		}
		ev.AcceptedDigest, ev.Reason, ev.Changes = p.Digest, p.Pending.Reason, p.Pending.Changes
		if err := f(&p); err != nil {
			return Pin{}, err
		}
		e, err := k.put(ctx, p, r.Version)
		if errors.Is(err, store.ErrVersionConflict) {
			continue
		}
		if err != nil {
			return Pin{}, err
		}
		k.mu.Lock()
		k.pins[tool] = e
		delete(k.over, tool)
		k.mu.Unlock()
		k.log.Info("tool definition "+ev.Kind, "tool", tool, "digest", digest, "by", ev.By)
		k.event(ev)
		k.changed()
		return p, nil
	}
	return Pin{}, ErrStale
}
