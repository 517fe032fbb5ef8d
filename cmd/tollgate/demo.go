package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/tollgate-mcp/tollgate/internal/demo"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// heldLines returns a task subscriber that queues one human line for every call held for a
// human approval (the console or CLI decides it, not the requester). It never blocks: a
// line that does not fit the queue is dropped.
func heldLines(b demo.Banner, out chan<- string) func(tasks.Transition) {
	return func(tr tasks.Transition) {
		t := tr.Task
		if !tr.Created() || tr.To != tasks.AwaitingApproval || t.AskRequester {
			return
		}
		select {
		case out <- demo.HeldLine(b.CLI, t.Tool, t.ID, t.Workflow, b.ConsoleURL):
		default:
		}
	}
}

// startHeldPrinter prints the lines queued on held (heldLines) to w until stop or ctx ends.
func startHeldPrinter(ctx context.Context, w io.Writer) (held chan string, stop context.CancelFunc) {
	held = make(chan string, 64)
	ctx, stop = context.WithCancel(ctx)
	go printHeld(ctx, w, held)
	return held, stop
}

// printHeld writes the queued lines until ctx ends.
func printHeld(ctx context.Context, w io.Writer, lines <-chan string) {
	for {
		select {
		case <-ctx.Done():
			return
		case l := <-lines:
			fmt.Fprintln(w, l)
		}
	}
}

// cliName is how the user ran this command, for commands printed back to them: "go run
// ./cmd/tollgate" under go run (its binary is a temporary file), else the path as typed.
func cliName() string {
	arg0 := os.Args[0]
	if strings.Contains(arg0, "go-build") {
		return "go run ./cmd/tollgate"
	}
	if !strings.ContainsRune(arg0, filepath.Separator) {
		return arg0 // found on $PATH
	}
	if filepath.IsAbs(arg0) {
		if wd, err := os.Getwd(); err == nil {
			if rel, err := filepath.Rel(wd, arg0); err == nil && !strings.HasPrefix(rel, "..") {
				if !strings.ContainsRune(rel, filepath.Separator) {
					rel = "." + string(filepath.Separator) + rel
				}
				return rel
			}
		}
	}
	return arg0
}
