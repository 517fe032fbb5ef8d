// Command tollgateprof runs the same server as `tollgate run --config FILE` and writes a CPU
// profile (and a heap profile) when it is stopped, so the load harness can profile Tollgate
// under load without pprof endpoints in the product; with TOLLGATE_HEAPPROFILE set, SIGUSR1
// writes a heap profile at once. Use it as the harness's tollgate:
//
//	go build -o /tmp/prof/tollgate ./test/bench/cmd/tollgateprof   # plus the two helpers
//	TOLLGATE_CPUPROFILE=/tmp/tg.cpu go run ./test/bench/cmd/loadtest -bin /tmp/prof -only list-1000
//	go tool pprof -top /tmp/prof/tollgate /tmp/tg.cpu
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/server"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "run" {
		args = args[1:]
	}
	fs := flag.NewFlagSet("tollgateprof", flag.ExitOnError)
	cfgPath := fs.String("config", "", "config file")
	_ = fs.Parse(args)
	cfg, err := config.Load(*cfgPath, os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cpuPath := os.Getenv("TOLLGATE_CPUPROFILE")
	if cpuPath != "" {
		f, err := os.Create(cpuPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := server.New(cfg, server.Options{Logger: log, Version: "bench-profile"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if p := os.Getenv("TOLLGATE_HEAPPROFILE"); p != "" {
		// kill -USR1 writes a heap profile now, as PATH.1, PATH.2, …: the live heap while
		// approvals or held calls are pending (GODEBUG=memprofilerate=1 for every allocation).
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		go func() {
			for n := 1; ; n++ {
				select {
				case <-ctx.Done():
					return
				case <-usr1:
					runtime.GC()
					if f, err := os.Create(fmt.Sprintf("%s.%d.%d", p, os.Getpid(), n)); err == nil {
						_ = pprof.WriteHeapProfile(f)
						f.Close()
					}
				}
			}
		}()
	}
	if err := srv.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if p := os.Getenv("TOLLGATE_HEAPPROFILE"); p != "" {
		runtime.GC()
		if f, err := os.Create(p); err == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
}
