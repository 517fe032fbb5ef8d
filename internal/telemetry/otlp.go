package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// exporter sends spans to an OTLP/HTTP collector as protobuf (OTLP specification 1.x,
// "OTLP/HTTP": POST of an ExportTraceServiceRequest to /v1/traces). It is Tollgate's own,
// written against the message definitions of opentelemetry-proto, so that the binary does not
// link the OpenTelemetry OTLP exporter with its generated protobuf and gRPC packages: those
// were ≈ 12 MB of the binary and ≈ 4 MB of idle RSS for a feature that is off by default
// (docs/PERFORMANCE.md "Idle RSS"). It reads the standard OTEL_EXPORTER_OTLP_[TRACES_]
// HEADERS, COMPRESSION, TIMEOUT, CERTIFICATE, CLIENT_CERTIFICATE and CLIENT_KEY variables.
type exporter struct {
	url      string
	client   *http.Client
	headers  http.Header
	gzip     bool
	timeout  time.Duration
	mu       sync.Mutex
	shutdown bool
}

var _ sdktrace.SpanExporter = (*exporter)(nil)

// exportRetries is how often a batch is sent again after 429/502/503/504 (OTLP/HTTP:
// retryable responses), within the export timeout.
const exportRetries = 2

// newExporter builds the exporter for endpoint (the traces URL) from the OTEL_EXPORTER_OTLP_*
// variables that lookup returns.
func newExporter(endpoint string, timeout time.Duration, lookup func(string) (string, bool)) (*exporter, error) {
	env := func(name string) string { // the TRACES_ variant wins (OTel SDK environment variables)
		if v, ok := lookup("OTEL_EXPORTER_OTLP_TRACES_" + name); ok {
			return v
		}
		v, _ := lookup("OTEL_EXPORTER_OTLP_" + name)
		return v
	}
	e := &exporter{url: endpoint, headers: http.Header{}, timeout: timeout}
	if v := env("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT %q: want milliseconds", v)
		}
		e.timeout = time.Duration(ms) * time.Millisecond
	}
	switch c := env("COMPRESSION"); c {
	case "", "none":
	case "gzip":
		e.gzip = true
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_COMPRESSION %q: want gzip or none", c)
	}
	if v := env("HEADERS"); v != "" { // W3C baggage-like: key=value,key=value, values URL-encoded
		for _, kv := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(kv, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				return nil, errors.New("OTEL_EXPORTER_OTLP_HEADERS: want key=value pairs separated by commas")
			}
			if dec, err := url.PathUnescape(strings.TrimSpace(val)); err == nil {
				val = dec
			}
			e.headers.Add(k, val)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if ca, cert, key := env("CERTIFICATE"), env("CLIENT_CERTIFICATE"), env("CLIENT_KEY"); ca != "" || cert != "" || key != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if ca != "" {
			pem, err := os.ReadFile(ca)
			if err != nil {
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CERTIFICATE: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CERTIFICATE %s: no PEM certificate", ca)
			}
		}
		if cert != "" || key != "" {
			pair, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE / _CLIENT_KEY: %w", err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		tr.TLSClientConfig = cfg
	}
	e.client = &http.Client{Transport: tr}
	return e, nil
}

// ExportSpans sends one batch; the batch span processor calls it from one goroutine.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	done := e.shutdown
	e.mu.Unlock()
	if done || len(spans) == 0 {
		return nil
	}
	body := encodeRequest(spans)
	if e.gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = b.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	backoff := 200 * time.Millisecond
	for attempt := 0; ; attempt++ {
		retry, err := e.post(ctx, body)
		if err == nil || !retry || attempt == exportRetries {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// post sends body once; retry says whether the collector asked to try again later.
func (e *exporter) post(ctx context.Context, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	for k, v := range e.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return true, fmt.Errorf("otlp export: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusBadGateway,
		resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		return true, fmt.Errorf("otlp export: collector answered HTTP %d", resp.StatusCode)
	}
	return false, fmt.Errorf("otlp export: collector answered HTTP %d", resp.StatusCode)
}

// Shutdown makes later exports no-ops; the batch processor flushes before calling it.
func (e *exporter) Shutdown(context.Context) error {
	e.mu.Lock()
	e.shutdown = true
	e.mu.Unlock()
	e.client.CloseIdleConnections()
	return nil
}

// Field numbers of opentelemetry-proto's collector/trace/v1, trace/v1, resource/v1 and
// common/v1 messages.
const (
	fRequestResourceSpans = 1 // ExportTraceServiceRequest.resource_spans

	fResourceSpansResource   = 1 // ResourceSpans.resource
	fResourceSpansScopeSpans = 2 // ResourceSpans.scope_spans
	fResourceSpansSchemaURL  = 3
	fResourceAttributes      = 1 // Resource.attributes

	fScopeSpansScope = 1 // ScopeSpans.scope
	fScopeSpansSpans = 2
	fScopeName       = 1 // InstrumentationScope.name
	fScopeVersion    = 2

	fSpanTraceID      = 1
	fSpanSpanID       = 2
	fSpanTraceState   = 3
	fSpanParentSpanID = 4
	fSpanName         = 5
	fSpanKind         = 6
	fSpanStart        = 7 // fixed64 unix nanoseconds
	fSpanEnd          = 8
	fSpanAttributes   = 9
	fSpanDroppedAttrs = 10
	fSpanEvents       = 11
	fSpanDroppedEvts  = 12
	fSpanLinks        = 13
	fSpanDroppedLinks = 14
	fSpanStatus       = 15
	fSpanFlags        = 16 // fixed32

	fEventTime       = 1 // fixed64
	fEventName       = 2
	fEventAttributes = 3

	fLinkTraceID    = 1
	fLinkSpanID     = 2
	fLinkTraceState = 3
	fLinkAttributes = 4

	fStatusMessage = 2
	fStatusCode    = 3

	fKeyValueKey   = 1
	fKeyValueValue = 2

	fAnyString = 1
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5
	fArrayVals = 1 // ArrayValue.values
)

// encodeRequest encodes spans as one ExportTraceServiceRequest: a ResourceSpans per resource,
// a ScopeSpans per instrumentation scope, in the order the spans came.
func encodeRequest(spans []sdktrace.ReadOnlySpan) []byte {
	type scopeKey struct{ name, version string }
	var out []byte
	for i := 0; i < len(spans); {
		res := spans[i].Resource()
		j := i
		for j < len(spans) && spans[j].Resource() == res {
			j++
		}
		var rs []byte
		if res != nil {
			var r []byte
			for _, kv := range res.Attributes() {
				r = appendMessage(r, fResourceAttributes, appendKeyValue(nil, kv))
			}
			rs = appendMessage(rs, fResourceSpansResource, r)
		}
		groups := map[scopeKey][]byte{}
		var order []scopeKey
		for _, s := range spans[i:j] {
			sc := s.InstrumentationScope()
			k := scopeKey{sc.Name, sc.Version}
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = appendMessage(groups[k], fScopeSpansSpans, appendSpan(nil, s))
		}
		for _, k := range order {
			var scope []byte
			scope = appendString(scope, fScopeName, k.name)
			scope = appendString(scope, fScopeVersion, k.version)
			ss := appendMessage(nil, fScopeSpansScope, scope)
			ss = append(ss, groups[k]...)
			rs = appendMessage(rs, fResourceSpansScopeSpans, ss)
		}
		if res != nil {
			rs = appendString(rs, fResourceSpansSchemaURL, res.SchemaURL())
		}
		out = appendMessage(out, fRequestResourceSpans, rs)
		i = j
	}
	return out
}

func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = protowire.AppendTag(b, fSpanTraceID, protowire.BytesType)
	b = protowire.AppendBytes(b, tid[:])
	b = protowire.AppendTag(b, fSpanSpanID, protowire.BytesType)
	b = protowire.AppendBytes(b, sid[:])
	b = appendString(b, fSpanTraceState, sc.TraceState().String())
	if p := s.Parent(); p.SpanID().IsValid() {
		psid := p.SpanID()
		b = protowire.AppendTag(b, fSpanParentSpanID, protowire.BytesType)
		b = protowire.AppendBytes(b, psid[:])
	}
	b = appendString(b, fSpanName, s.Name())
	b = appendVarint(b, fSpanKind, uint64(s.SpanKind()))
	b = appendTime(b, fSpanStart, s.StartTime())
	b = appendTime(b, fSpanEnd, s.EndTime())
	for _, kv := range s.Attributes() {
		b = appendMessage(b, fSpanAttributes, appendKeyValue(nil, kv))
	}
	b = appendVarint(b, fSpanDroppedAttrs, uint64(max(s.DroppedAttributes(), 0)))
	for _, ev := range s.Events() {
		var e []byte
		e = appendTime(e, fEventTime, ev.Time)
		e = appendString(e, fEventName, ev.Name)
		for _, kv := range ev.Attributes {
			e = appendMessage(e, fEventAttributes, appendKeyValue(nil, kv))
		}
		b = appendMessage(b, fSpanEvents, e)
	}
	b = appendVarint(b, fSpanDroppedEvts, uint64(max(s.DroppedEvents(), 0)))
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		var e []byte
		e = protowire.AppendTag(e, fLinkTraceID, protowire.BytesType)
		e = protowire.AppendBytes(e, ltid[:])
		e = protowire.AppendTag(e, fLinkSpanID, protowire.BytesType)
		e = protowire.AppendBytes(e, lsid[:])
		e = appendString(e, fLinkTraceState, l.SpanContext.TraceState().String())
		for _, kv := range l.Attributes {
			e = appendMessage(e, fLinkAttributes, appendKeyValue(nil, kv))
		}
		b = appendMessage(b, fSpanLinks, e)
	}
	b = appendVarint(b, fSpanDroppedLinks, uint64(max(s.DroppedLinks(), 0)))
	if st := s.Status(); st.Code != codes.Unset {
		var e []byte
		e = appendString(e, fStatusMessage, st.Description)
		code := uint64(1) // STATUS_CODE_OK
		if st.Code == codes.Error {
			code = 2 // STATUS_CODE_ERROR
		}
		e = appendVarint(e, fStatusCode, code)
		b = appendMessage(b, fSpanStatus, e)
	}
	b = protowire.AppendTag(b, fSpanFlags, protowire.Fixed32Type)
	flags := uint32(sc.TraceFlags()) | 0x100 // SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
	if p := s.Parent(); p.IsRemote() {
		flags |= 0x200 // SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK: the parent came from a client
	}
	return protowire.AppendFixed32(b, flags)
}

func appendKeyValue(b []byte, kv attribute.KeyValue) []byte {
	b = appendString(b, fKeyValueKey, string(kv.Key))
	return appendMessage(b, fKeyValueValue, appendAnyValue(nil, kv.Value))
}

func appendAnyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		return appendVarintAlways(b, fAnyBool, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		return appendVarintAlways(b, fAnyInt, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, fAnyDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		b = protowire.AppendTag(b, fAnyString, protowire.BytesType)
		return protowire.AppendString(b, v.AsString())
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE:
		var arr []byte
		switch v.Type() {
		case attribute.BOOLSLICE:
			for _, x := range v.AsBoolSlice() {
				arr = appendMessage(arr, fArrayVals, appendAnyValue(nil, attribute.BoolValue(x)))
			}
		case attribute.INT64SLICE:
			for _, x := range v.AsInt64Slice() {
				arr = appendMessage(arr, fArrayVals, appendAnyValue(nil, attribute.Int64Value(x)))
			}
		case attribute.FLOAT64SLICE:
			for _, x := range v.AsFloat64Slice() {
				arr = appendMessage(arr, fArrayVals, appendAnyValue(nil, attribute.Float64Value(x)))
			}
		default:
			for _, x := range v.AsStringSlice() {
				arr = appendMessage(arr, fArrayVals, appendAnyValue(nil, attribute.StringValue(x)))
			}
		}
		return appendMessage(b, fAnyArray, arr)
	}
	b = protowire.AppendTag(b, fAnyString, protowire.BytesType) // INVALID: an empty string
	return protowire.AppendString(b, v.Emit())
}

// appendMessage appends an embedded message (also an empty one: presence matters for
// messages such as a KeyValue's value).
func appendMessage(b []byte, num protowire.Number, msg []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}

// appendString appends a string field; proto3 leaves out the empty default.
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendVarint appends a varint field; proto3 leaves out the zero default.
func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return appendVarintAlways(b, num, v)
}

// appendVarintAlways appends a varint also when it is zero (a member of a oneof).
func appendVarintAlways(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendTime(b []byte, num protowire.Number, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, uint64(t.UnixNano()))
}
