// Command child is a small stdio MCP server for internal/stdio's tests: each tools/call
// name exercises one behaviour of the transport (see the switch below).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

type msg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

var (
	outMu   sync.Mutex
	stateMu sync.Mutex
	state   string
	asks    = map[string]chan json.RawMessage{}
)

func send(v any) {
	b, _ := json.Marshal(v)
	outMu.Lock()
	os.Stdout.Write(append(b, '\n'))
	outMu.Unlock()
}

func raw(s string) {
	outMu.Lock()
	os.Stdout.WriteString(s + "\n")
	outMu.Unlock()
}

func text(id json.RawMessage, s string) {
	send(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{
		"content": []any{map[string]any{"type": "text", "text": s}}}})
}

func main() {
	stubborn := flag.Bool("stubborn", false, "ignore stdin EOF and SIGTERM")
	initFail := flag.Bool("initfail", false, "exit at once with status 2")
	flag.Parse()
	if *initFail {
		fmt.Fprintln(os.Stderr, "refusing to start")
		os.Exit(2)
	}
	if *stubborn {
		signal.Ignore(syscall.SIGTERM)
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m msg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue
		}
		if m.Method == "" { // a response to one of our requests
			stateMu.Lock()
			ch := asks[string(m.ID)]
			stateMu.Unlock()
			if ch != nil {
				if m.Error != nil {
					ch <- json.RawMessage(`{"error":` + string(m.Error) + `}`)
				} else {
					ch <- m.Result
				}
			}
			continue
		}
		if m.ID == nil {
			if m.Method == "notifications/cancelled" {
				fmt.Fprintln(os.Stderr, "cancelled "+string(m.Params))
			}
			continue
		}
		go handle(m)
	}
	for *stubborn {
		time.Sleep(time.Hour)
	}
}

func handle(m msg) {
	switch m.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(m.Params, &p)
		send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{
			"protocolVersion": p.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]any{"name": "child", "version": "1"}}})
		return
	case "tools/list":
		send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"tools": []any{
			map[string]any{"name": "echo", "inputSchema": map[string]any{"type": "object"}}}}})
		return
	case "tools/call":
	default:
		send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "no such method"}})
		return
	}
	var p struct {
		Name string `json:"name"`
		Args struct {
			Text string `json:"text"`
			N    int    `json:"n"`
		} `json:"arguments"`
		Meta struct {
			Token json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(m.Params, &p)
	switch p.Name {
	case "echo":
		text(m.ID, p.Args.Text)
	case "pid":
		text(m.ID, fmt.Sprint(os.Getpid()))
	case "set":
		stateMu.Lock()
		state = p.Args.Text
		stateMu.Unlock()
		text(m.ID, "ok")
	case "get":
		stateMu.Lock()
		s := state
		stateMu.Unlock()
		text(m.ID, s)
	case "env":
		text(m.ID, os.Getenv(p.Args.Text))
	case "cwd":
		wd, _ := os.Getwd()
		text(m.ID, wd)
	case "parent-environ": // what a server could learn of the process that started it
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", os.Getppid()))
		if err != nil {
			text(m.ID, "error: "+err.Error())
		} else {
			text(m.ID, fmt.Sprintf("read %d bytes", len(b)))
		}
	case "fds": // its descriptors and what they are (the runtime adds some of its own)
		d, err := os.Open("/proc/self/fd")
		if err != nil {
			text(m.ID, "error: "+err.Error())
			return
		}
		names, _ := d.Readdirnames(-1)
		var fds []string
		for _, n := range names {
			if target, err := os.Readlink("/proc/self/fd/" + n); err == nil {
				fds = append(fds, n+"="+target)
			}
		}
		d.Close()
		sort.Strings(fds)
		text(m.ID, strings.Join(fds, " "))
	case "whoami":
		groups, _ := os.Getgroups()
		text(m.ID, fmt.Sprintf("uid=%d gid=%d groups=%v", os.Getuid(), os.Getgid(), groups))
	case "progress":
		send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress",
			"params": map[string]any{"progressToken": p.Meta.Token, "progress": 1, "total": 2}})
		text(m.ID, "done")
	case "ask":
		id := fmt.Sprintf("ask-%s", strings.Trim(string(m.ID), `"`))
		ch := make(chan json.RawMessage, 1)
		qid, _ := json.Marshal(id)
		stateMu.Lock()
		asks[string(qid)] = ch
		stateMu.Unlock()
		send(map[string]any{"jsonrpc": "2.0", "id": id, "method": "roots/list"})
		text(m.ID, "answered "+string(<-ch))
	case "ask-later": // a request of its own after the reply: nobody is there to answer it
		ch := make(chan json.RawMessage, 1)
		stateMu.Lock()
		asks[`"late-1"`] = ch
		stateMu.Unlock()
		text(m.ID, "ok")
		send(map[string]any{"jsonrpc": "2.0", "id": "late-1", "method": "roots/list"})
		fmt.Fprintln(os.Stderr, "late answer "+string(<-ch))
	case "later": // a message after the reply: no request of the client's is in flight
		text(m.ID, "ok")
		send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
	case "sleep":
		fmt.Fprintln(os.Stderr, "sleeping")
		time.Sleep(time.Duration(p.Args.N) * time.Millisecond)
		text(m.ID, "slept")
	case "die":
		os.Exit(3)
	case "garbage":
		raw(`not json {"secret-argument": "` + p.Args.Text + `"}`)
		text(m.ID, "after garbage")
	case "big":
		text(m.ID, strings.Repeat("x", p.Args.N))
	case "stderr":
		for i := range p.Args.N {
			fmt.Fprintf(os.Stderr, "line %d %s\n", i, p.Args.Text)
		}
		text(m.ID, "ok")
	default:
		send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32602, "message": "unknown tool"}})
	}
}
