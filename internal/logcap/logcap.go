// Package logcap bounds what untrusted input can make Tollgate log. Clients choose tool names,
// methods and arguments; without bounds, 100 calls with 1 MB tool names wrote 100 MB of logs.
// Handler clips every string a record carries, and Sampler rate-limits a warning a client can
// trigger at will (golang.org/x/time/rate), counting what it held back.
package logcap

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"
)

// Caps in bytes: names (attributes "tool", "method", "name") and every other string value or
// message. MCP recommends tool names of at most 128 characters (spec 2025-11-25 tools).
const (
	NameBytes  = 128
	ValueBytes = 2048
)

var nameKeys = map[string]bool{"tool": true, "method": true, "name": true}

// Clip returns s when it has at most n bytes, else its first n bytes (whole runes) followed by
// "…(N bytes)" with the original length, so a reader sees that and how much was cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// Handler clips the message and every string attribute (in groups too, and error texts) of
// the records it passes to next.
type Handler struct{ next slog.Handler }

var _ slog.Handler = Handler{}

// NewHandler wraps next.
func NewHandler(next slog.Handler) Handler { return Handler{next: next} }

func (h Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h Handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, Clip(r.Message, ValueBytes), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(clipAttr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h Handler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = clipAttr(a)
	}
	return Handler{next: h.next.WithAttrs(out)}
}

func (h Handler) WithGroup(name string) slog.Handler { return Handler{next: h.next.WithGroup(name)} }

func clipAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		n := ValueBytes
		if nameKeys[a.Key] {
			n = NameBytes
		}
		return slog.String(a.Key, Clip(v.String(), n))
	case slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, x := range g {
			out[i] = clipAttr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, Clip(err.Error(), ValueBytes))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// Sampler lets a repeated record through burst times at once and then once per every.
type Sampler struct {
	lim  *rate.Limiter
	held atomic.Int64
}

// NewSampler returns a sampler allowing burst records at once, then one per every.
func NewSampler(every time.Duration, burst int) *Sampler {
	return &Sampler{lim: rate.NewLimiter(rate.Every(every), burst)}
}

// Allow reports whether to log now, and how many records were held back since the last one
// let through (log it as "suppressed" so the volume stays visible).
func (s *Sampler) Allow() (ok bool, suppressed int64) {
	if !s.lim.Allow() {
		s.held.Add(1)
		return false, 0
	}
	return true, s.held.Swap(0)
}
