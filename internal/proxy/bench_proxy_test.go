package proxy

import (
	"bytes"

	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

var benchCall = []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)

// benchUpstream answers every POST with a small tools/call result, as JSON or as one SSE
// event, echoing the request id the way an MCP server does.
func benchUpstream(b *testing.B, sseReply bool, resultBytes int) *httptest.Server {
	b.Helper()
	text := strings.Repeat("x", resultBytes)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := "42"
		if i := bytes.Index(body, []byte(`"id":`)); i >= 0 {
			if j := bytes.IndexByte(body[i+5:], ','); j >= 0 {
				id = string(body[i+5 : i+5+j])
			}
		}
		msg := `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"` + text + `"}]}}`
		if sseReply {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message\ndata: "+msg+"\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, msg)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func benchFront(b *testing.B, h http.Handler) (*httptest.Server, *http.Client) {
	b.Helper()
	front := httptest.NewServer(h)
	b.Cleanup(front.Close)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	b.Cleanup(hc.CloseIdleConnections)
	return front, hc
}

func post(b *testing.B, hc *http.Client, u string) {
	req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(benchCall))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || n == 0 {
		b.Fatalf("HTTP %d, %d bytes", resp.StatusCode, n)
	}
}

// BenchmarkPassthrough is one tools/call through Tollgate's /mcp handler (no governance
// router: the transport alone) over loopback HTTP, with the upstream in the same process.
// BenchmarkReverseProxy is the same exchange through httputil.ReverseProxy, the floor.
func BenchmarkPassthrough(b *testing.B) {
	for _, bm := range []struct {
		name        string
		sse         bool
		resultBytes int
	}{
		{"json_small", false, 16},
		{"sse_small", true, 16},
		{"sse_1MiB", true, 1 << 20},
		{"json_1MiB", false, 1 << 20},
	} {
		b.Run(bm.name, func(b *testing.B) {
			up := benchUpstream(b, bm.sse, bm.resultBytes)
			uc, err := upstream.New(up.URL, upstream.Options{})
			if err != nil {
				b.Fatal(err)
			}
			h := New(Options{Upstream: uc, Sessions: session.NewRegistry(0, nil)})
			front, hc := benchFront(b, h)
			b.ReportAllocs()
			for b.Loop() {
				post(b, hc, front.URL)
			}
		})
	}
}

func BenchmarkPassthroughParallel(b *testing.B) {
	up := benchUpstream(b, false, 16)
	uc, err := upstream.New(up.URL, upstream.Options{})
	if err != nil {
		b.Fatal(err)
	}
	front, hc := benchFront(b, New(Options{Upstream: uc, Sessions: session.NewRegistry(0, nil)}))
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			post(b, hc, front.URL)
		}
	})
}

func BenchmarkReverseProxy(b *testing.B) {
	for _, bm := range []struct {
		name        string
		sse         bool
		resultBytes int
	}{
		{"json_small", false, 16},
		{"sse_small", true, 16},
		{"sse_1MiB", true, 1 << 20},
		{"json_1MiB", false, 1 << 20},
	} {
		b.Run(bm.name, func(b *testing.B) {
			up := benchUpstream(b, bm.sse, bm.resultBytes)
			target, _ := url.Parse(up.URL)
			rp := &httputil.ReverseProxy{
				Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
				Transport:     &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
				FlushInterval: -1,
			}
			front, hc := benchFront(b, rp)
			b.ReportAllocs()
			for b.Loop() {
				post(b, hc, front.URL)
			}
		})
	}
}
