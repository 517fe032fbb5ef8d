// Command bareproxy is the floor of one extra hop: a plain httputil.ReverseProxy in its own
// process in front of the bench upstream, with a transport tuned like Tollgate's.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"
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
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("bareproxy: %v", err)
	}
	hs := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("LISTENING http://%s/mcp\n", ln.Addr())
	os.Stdout.Sync()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); err != nil && err != http.ErrServerClosed {
		log.Fatalf("bareproxy: %v", err)
	}
}
