// Package telemetry is Tollgate's distributed tracing: W3C Trace Context parsing, a server span
// per /mcp request, a client span per upstream request, and OTLP/HTTP export. Tracing is off
// unless telemetry.otlp_endpoint is set; off means no spans and no header rewriting, so a
// client's traceparent reaches the upstream exactly as sent.
package telemetry

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// Header names of W3C Trace Context (https://www.w3.org/TR/trace-context/ §3).
const (
	HeaderTraceparent = "Traceparent"
	HeaderTracestate  = "Tracestate"
)

// Traceparent is a parsed traceparent header.
type Traceparent struct {
	Version byte
	TraceID trace.TraceID
	SpanID  trace.SpanID // the caller's span: the parent of the span that receives it
	Flags   trace.TraceFlags
}

// Sampled reports the sampled flag.
func (p Traceparent) Sampled() bool { return p.Flags.IsSampled() }

// String formats p as a version 00 header value (the only format this version writes).
func (p Traceparent) String() string {
	return fmt.Sprintf("00-%s-%s-%02x", p.TraceID, p.SpanID, byte(p.Flags))
}

// ErrInvalidTraceparent is wrapped by every ParseTraceparent error.
var ErrInvalidTraceparent = errors.New("invalid traceparent")

// ParseTraceparent parses and validates a traceparent header value (W3C Trace Context §3.2).
// Lowercase hex only; version ff, all-zero ids and malformed lengths are invalid. A version
// above 00 is parsed by its first 55 characters, which must be followed by nothing or "-"
// (§3.2.4, forward compatibility).
func ParseTraceparent(s string) (Traceparent, error) {
	var p Traceparent
	bad := func(why string) (Traceparent, error) {
		return Traceparent{}, fmt.Errorf("%w: %s", ErrInvalidTraceparent, why)
	}
	if len(s) < 55 {
		return bad("too short")
	}
	v, ok := lowerHex(s[0:2])
	if !ok {
		return bad("version is not two lowercase hex digits")
	}
	p.Version = v[0]
	switch {
	case p.Version == 0xff:
		return bad("version ff is forbidden")
	case p.Version == 0 && len(s) != 55:
		return bad("version 00 must be exactly 55 characters")
	case len(s) > 55 && s[55] != '-':
		return bad("unexpected data after the flags")
	}
	if s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return bad("fields must be separated by '-'")
	}
	tid, ok := lowerHex(s[3:35])
	if !ok {
		return bad("trace-id is not 32 lowercase hex digits")
	}
	copy(p.TraceID[:], tid)
	if !p.TraceID.IsValid() {
		return bad("trace-id is all zeros")
	}
	sid, ok := lowerHex(s[36:52])
	if !ok {
		return bad("parent-id is not 16 lowercase hex digits")
	}
	copy(p.SpanID[:], sid)
	if !p.SpanID.IsValid() {
		return bad("parent-id is all zeros")
	}
	f, ok := lowerHex(s[53:55])
	if !ok {
		return bad("trace-flags is not two lowercase hex digits")
	}
	// Only the sampled bit is acted on (§3.2.2.5); Tollgate writes version 00 onwards.
	p.Flags = trace.TraceFlags(f[0]) & trace.FlagsSampled
	return p, nil
}

// ParseTracestate validates a tracestate value (the header's values joined with ",";
// W3C Trace Context §3.3). An invalid tracestate is dropped by the caller, the traceparent kept.
func ParseTracestate(s string) (trace.TraceState, error) {
	return trace.ParseTraceState(s)
}

// lowerHex decodes s if it is only lowercase hex digits (hex.DecodeString also takes uppercase,
// which the spec forbids).
func lowerHex(s string) ([]byte, bool) {
	if strings.IndexFunc(s, func(r rune) bool { return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') }) >= 0 {
		return nil, false
	}
	b, err := hex.DecodeString(s)
	return b, err == nil
}

// remoteContext is the span context a valid traceparent (and tracestate, if valid) describe.
func remoteContext(traceparent string, tracestate []string) (trace.SpanContext, bool) {
	p, err := ParseTraceparent(traceparent)
	if err != nil {
		return trace.SpanContext{}, false
	}
	cfg := trace.SpanContextConfig{TraceID: p.TraceID, SpanID: p.SpanID, TraceFlags: p.Flags, Remote: true}
	if len(tracestate) > 0 {
		if ts, err := ParseTracestate(strings.Join(tracestate, ",")); err == nil {
			cfg.TraceState = ts
		}
	}
	return trace.NewSpanContext(cfg), true
}
