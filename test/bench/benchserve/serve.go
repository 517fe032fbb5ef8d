// Package benchserve runs the HTTP servers of the bench helper processes (the upstream and the
// bare proxy) the same way: listen, announce the address on stdout for the harness, serve until
// SIGINT/SIGTERM.
package benchserve

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Run listens on addr and serves h; the harness reads the "LISTENING http://…/mcp" line to
// learn the address when addr ends in :0. It returns when a signal stopped the server.
func Run(name, addr string, h http.Handler) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatalf("%s: %v", name, err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("LISTENING http://%s/mcp\n", ln.Addr())
	_ = os.Stdout.Sync()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); err != nil && err != http.ErrServerClosed {
		log.Fatalf("%s: %v", name, err)
	}
}
