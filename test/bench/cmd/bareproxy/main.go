// Command bareproxy is the floor of one extra hop: a plain httputil.ReverseProxy in its own
// process in front of the bench upstream, with a transport tuned like Tollgate's.
package main

import (
	"bytes"
	"flag"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/tollgate-mcp/tollgate/test/bench/benchserve"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := flag.String("upstream", "", "upstream MCP URL, e.g. http://127.0.0.1:3000/mcp")
	flag.Parse()
	target, err := url.Parse(*upstream)
	if err != nil || target.Host == "" {
		log.Fatalf("bareproxy: -upstream must be an absolute URL")
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 512,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme = target.Scheme
			r.Out.URL.Host = target.Host
			r.Out.URL.Path = target.Path
			r.Out.Host = target.Host
		},
		Transport:     tr,
		FlushInterval: -1, // flush every write, as an SSE-aware proxy must
	}
	benchserve.Run("bareproxy", *listen, readFirst(rp))
}

// readFirst reads the request body whole before proxying. ReverseProxy streams it by default,
// and with an upstream that answers (and flushes SSE headers) before the proxy saw the body's
// EOF, net/http may close the inbound body under the transport, which then drops the
// connection mid-reply ("use of closed network connection", seen here on the 1 MiB SSE
// scenario). Tollgate reads bodies first too (docs/contract.md §1), so the floor stays comparable.
func readFirst(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			b, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
			if err != nil {
				http.Error(w, "reading request body", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			r.ContentLength = int64(len(b))
		}
		next.ServeHTTP(w, r)
	})
}
