package stdio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/logcap"
)

// child is one running server process: Tollgate writes requests to its stdin and routes
// what it prints on stdout, one JSON-RPC message a line, to the requests and sessions
// waiting for it. Its stderr goes to the log.
type child struct {
	t       *Transport
	n       uint64 // sequence number, names the process in logs
	src     string // the source it was started for ("": the shared process), for its backoff
	cmd     *exec.Cmd
	stdin   *os.File
	wmu     sync.Mutex // one message written at a time
	started time.Time
	waited  chan struct{} // closed once the process has been reaped (waitErr set)
	waitErr error
	done    chan struct{} // closed after stdout ended and every pending call was failed
	errDone chan struct{} // closed once stderr is read to its end (or given up on)
	stopped sync.Once
	stopReq bool // the exit was asked for (stop), not a crash

	mu     sync.Mutex
	calls  map[string]*call    // requests written, by the id Tollgate wrote on stdin
	asks   map[string]*session // the child's own requests, by id: the session they went to
	owners []*session          // sessions on this child (one unless shared)
	nextID uint64
	exit   string // why it ended, once done

	logs *logcap.Sampler // stderr lines and skipped stdout lines
}

// call is one request waiting for the child's answer.
type call struct {
	s      *session
	seq    uint64
	wireID json.RawMessage // the id written to the child
	origID json.RawMessage // the id the request came with, restored on the reply
	token  json.RawMessage // params._meta.progressToken, raw (nil: none)
	msgs   chan []byte     // related messages before the reply (progress, server→client requests)
	reply  chan []byte     // the reply, exactly once (cap 1)
}

// callQueue bounds the related messages one request buffers; beyond it they are dropped (a
// child flooding notifications cannot grow Tollgate's memory).
const callQueue = 256

func (t *Transport) spawn(label, src string) (*child, error) {
	cmd := exec.Command(t.o.Command, t.o.Args...)
	cmd.Env = t.o.Env
	cmd.Dir = t.o.Dir
	setProcAttr(cmd, t.o.RunAs)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		for _, f := range []*os.File{inR, inW, outR, outW} {
			f.Close()
		}
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := closeOnExecAll(); err != nil {
		t.log.Warn("stdio: could not mark Tollgate's descriptors close-on-exec", "error", err.Error())
	}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("starting %s: %w", t.o.Command, err)
	}
	c := &child{
		t: t, n: t.seq.Add(1), src: src, cmd: cmd, stdin: inW, started: time.Now(),
		waited: make(chan struct{}), done: make(chan struct{}), errDone: make(chan struct{}),
		calls: map[string]*call{}, asks: map[string]*session{},
		logs: logcap.NewSampler(50*time.Millisecond, 100),
	}
	t.log.Info("stdio server started", "process", c.n, "pid", cmd.Process.Pid, "session", label)
	t.wg.Add(3)
	go func() {
		defer t.wg.Done()
		c.waitErr = cmd.Wait()
		close(c.waited)
		// A helper the server started (npx runs node) may still hold stdout open: the exit
		// would go unnoticed until it ends. Give it the stop grace, then end the group.
		select {
		case <-c.done:
		case <-time.After(t.o.StopGrace):
			killGroup(cmd)
		}
	}()
	go func() {
		defer t.wg.Done()
		defer close(c.errDone)
		c.readStderr(errR, label)
	}()
	go func() {
		defer t.wg.Done()
		c.readStdout(outR)
	}()
	return c, nil
}

// readStdout routes every line until stdout ends, then makes sure the process is gone and
// fails what still waits for it.
func (c *child) readStdout(r *os.File) {
	defer r.Close()
	err := readLines(r, c.t.o.MaxMessageBytes, c.route, func(n int) {
		c.t.log.Warn("stdio server wrote a message over the size limit; skipped",
			"process", c.n, "bytes", n, "limit", c.t.o.MaxMessageBytes)
	})
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
		c.t.log.Warn("reading the stdio server's stdout failed", "process", c.n, "error", err.Error())
	}
	c.halt() // a server that closed stdout cannot answer any more
	c.finish()
}

// readStderr copies stderr into the log line by line: clipped, rate-limited, with the
// process and session it belongs to. It is the server's own diagnostics, so it is logged at
// info; Tollgate never writes tool arguments there itself.
func (c *child) readStderr(r *os.File, label string) {
	defer r.Close()
	_ = readLines(r, stderrLine, func(line []byte) {
		if ok, held := c.logs.Allow(); ok {
			c.t.log.Info("stdio server stderr", "process", c.n, "session", label,
				"line", logcap.Clip(string(line), stderrClip), "suppressed", held)
		}
	}, func(n int) {
		if ok, held := c.logs.Allow(); ok {
			c.t.log.Info("stdio server stderr: an over-long line skipped", "process", c.n, "session", label, "bytes", n, "suppressed", held)
		}
	})
}

const (
	stderrLine = 64 << 10 // longer stderr lines are skipped whole
	stderrClip = 512      // what of a stderr line reaches the log
)

// route delivers one line the child printed: a reply to its request, a related message to
// the request's stream, anything else to the session's GET stream. A line that is not one
// JSON-RPC message is skipped and logged by length only (it may echo tool arguments).
func (c *child) route(line []byte) {
	line = bytes.Clone(line)
	m, err := jsonrpc.Parse(line)
	if err != nil {
		if ok, held := c.logs.Allow(); ok {
			c.t.log.Warn("stdio server wrote a line that is not a JSON-RPC message; skipped",
				"process", c.n, "bytes", len(line), "suppressed", held)
		}
		return
	}
	switch m.Kind {
	case jsonrpc.KindResponse:
		c.mu.Lock()
		cl := c.calls[string(m.ID)]
		delete(c.calls, string(m.ID))
		c.mu.Unlock()
		if cl == nil {
			c.t.log.Debug("stdio server answered a request nobody waits for", "process", c.n)
			return
		}
		cl.reply <- m.WithID(cl.origID)
	case jsonrpc.KindRequest:
		c.mu.Lock()
		s, cl, why := c.asker()
		if s != nil {
			c.asks[string(m.ID)] = s
		}
		c.mu.Unlock()
		if s == nil {
			// Tollgate cannot tell whose question this is: refused, never put to a guess. The
			// refusal is written apart: this goroutine must keep reading stdout meanwhile.
			refusal := jsonrpc.ErrorResponse(m.ID, jsonrpc.NewError(jsonrpc.CodeMethodNotFound,
				"NotBridged", "Tollgate cannot relay "+m.Method+": "+why))
			c.t.wg.Add(1)
			go func() {
				defer c.t.wg.Done()
				_ = c.write(context.Background(), refusal)
			}()
			return
		}
		c.deliver(s, cl, line)
	case jsonrpc.KindNotification:
		c.mu.Lock()
		var s *session
		var cl *call
		if tok := progressToken(m.Params); tok != nil && m.Method == "notifications/progress" {
			cl = c.byToken(tok)
		}
		if cl != nil {
			s = cl.s
		} else {
			s, cl = c.target()
		}
		all := s == nil && len(c.owners) > 0
		owners := append([]*session(nil), c.owners...)
		c.mu.Unlock()
		if all {
			for _, o := range owners { // shared, no request in flight: every client hears it
				o.push(line)
			}
			return
		}
		if s != nil {
			c.deliver(s, cl, line)
		}
	}
}

// target is where a message of the child's that names no request goes: the oldest request
// in flight (its POST stream, spec transports: related messages go there), else — one
// session on the child — that session's GET stream. Shared with nothing in flight: nil.
// c.mu held.
func (c *child) target() (*session, *call) {
	var oldest *call
	for _, cl := range c.calls {
		if oldest == nil || cl.seq < oldest.seq {
			oldest = cl
		}
	}
	if oldest != nil {
		return oldest.s, oldest
	}
	if !c.t.o.Share && len(c.owners) == 1 {
		return c.owners[0], nil
	}
	return nil, nil
}

// asker is where a request of the child's own goes (elicitation, sampling, roots). A stdio
// server's request names no request of the client's (spec transports, stdio), so it is put
// only where Tollgate can tell whose it is, never to a guess (a question reaching another
// caller would let that caller read and answer it):
//   - the one request in flight on the process: its stream (the question came while it ran);
//   - several in flight, all of one session: that session's GET stream if it listens (its
//     client, not one of its calls, since Tollgate cannot tell which call asked);
//   - nothing in flight on a process of its own: its session's GET stream.
//
// Otherwise — requests of several sessions in flight on a shared process, or none — the
// result is nil with the reason, and the request is refused (NotBridged). c.mu held.
func (c *child) asker() (*session, *call, string) {
	var one *call
	n, several := 0, false
	for _, cl := range c.calls {
		if cl.s == nil {
			continue // the shared process's own initialize
		}
		n++
		if one != nil && cl.s != one.s {
			several = true
		}
		one = cl
	}
	switch {
	case several:
		return nil, nil, "requests of several clients are in flight on the shared process, and it does not say which one asked"
	case n == 1:
		return one.s, one, ""
	case n > 1:
		if one.s.listening() {
			return one.s, nil, ""
		}
		return nil, nil, "several requests of the client are in flight, the process does not say which one asked, and the client has no GET stream"
	case !c.t.o.Share && len(c.owners) == 1:
		return c.owners[0], nil, ""
	}
	return nil, nil, "no request of a client is in flight on the shared process"
}

// byToken is the request in flight that asked for progress under tok. c.mu held.
func (c *child) byToken(tok json.RawMessage) *call {
	for _, cl := range c.calls {
		if cl.token != nil && bytes.Equal(cl.token, tok) {
			return cl
		}
	}
	return nil
}

func (c *child) deliver(s *session, cl *call, msg []byte) {
	if cl != nil {
		select {
		case cl.msgs <- msg:
		default:
			c.dropped()
		}
		return
	}
	if !s.push(msg) {
		c.dropped()
	}
}

func (c *child) dropped() {
	if ok, held := c.logs.Allow(); ok {
		c.t.log.Warn("stdio server message dropped: the stream it belongs to is full or closed", "process", c.n, "suppressed", held)
	}
}

func progressToken(params json.RawMessage) json.RawMessage {
	if params == nil {
		return nil
	}
	if tok := jsonrpc.Member(params, "progressToken"); tok != nil {
		return tok
	}
	if meta := jsonrpc.Member(params, "_meta"); meta != nil {
		return jsonrpc.Member(meta, "progressToken")
	}
	return nil
}

// register adds a pending request of session s and returns it with the line to write.
func (c *child) register(s *session, m *jsonrpc.Message) (*call, []byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exit != "" {
		return nil, nil, c.exitError()
	}
	c.nextID++
	cl := &call{
		s: s, seq: c.nextID, origID: bytes.Clone(m.ID),
		wireID: json.RawMessage(`"tg-` + strconv.FormatUint(c.nextID, 10) + `"`),
		msgs:   make(chan []byte, callQueue), reply: make(chan []byte, 1),
	}
	if meta := jsonrpc.Member(m.Params, "_meta"); meta != nil {
		cl.token = bytes.Clone(jsonrpc.Member(meta, "progressToken"))
	}
	c.calls[string(cl.wireID)] = cl
	return cl, m.WithID(cl.wireID), nil
}

func (c *child) unregister(cl *call) {
	c.mu.Lock()
	delete(c.calls, string(cl.wireID))
	c.mu.Unlock()
}

// wireIDOf is the id Tollgate wrote for session s's request origID (nil: none in flight).
func (c *child) wireIDOf(s *session, origID json.RawMessage) json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.calls {
		if cl.s == s && jsonrpc.SameID(cl.origID, origID) {
			return cl.wireID
		}
	}
	return nil
}

// takeAsk reports whether the child's request id went to session s, forgetting it: only
// that session may answer it.
func (c *child) takeAsk(s *session, id json.RawMessage) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.asks[string(id)] != s {
		return false
	}
	delete(c.asks, string(id))
	return true
}

// write sends one message and its newline. A child that stops reading stdin blocks it only
// until ctx's deadline (else writeTimeout).
func (c *child) write(ctx context.Context, msg []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(writeTimeout)
	}
	_ = c.stdin.SetWriteDeadline(dl)
	buf := make([]byte, 0, len(msg)+1)
	buf = append(append(buf, msg...), '\n')
	_, err := c.stdin.Write(buf)
	return err
}

const writeTimeout = 30 * time.Second

// stop ends the process (spec transports, stdio shutdown): close its stdin, wait; then
// SIGTERM, wait; then SIGKILL. It returns once the process is reaped and accounted for.
func (c *child) stop() {
	c.mu.Lock()
	if c.exit == "" {
		c.stopReq = true
	}
	c.mu.Unlock()
	c.halt()
	<-c.done
}

// halt is stop without waiting for the pending requests to be failed (readStdout's own end).
func (c *child) halt() {
	// Not under wmu: a write blocked on a server that stopped reading must not delay this;
	// closing the pipe ends that write too.
	c.stopped.Do(func() { _ = c.stdin.Close() })
	grace := c.t.o.StopGrace
	for _, sig := range []signal{sigTerm, sigKill} {
		select {
		case <-c.waited:
			killGroup(c.cmd) // helpers it started (npx → node) go with it
			return
		case <-time.After(grace):
		}
		if sig == sigTerm {
			c.t.log.Info("stdio server did not exit after stdin closed; sending SIGTERM", "process", c.n)
		} else {
			c.t.log.Warn("stdio server did not exit after SIGTERM; sending SIGKILL", "process", c.n)
		}
		signalGroup(c.cmd, sig)
	}
	<-c.waited
	killGroup(c.cmd)
}

// finish records why the process ended, fails every pending request with -32000
// UpstreamExited, and tells the transport.
func (c *child) finish() {
	<-c.waited
	// What the server wrote to stderr before it ended is logged before its end is (a helper
	// it started may hold stderr open a little longer: not past the stop grace).
	select {
	case <-c.errDone:
	case <-time.After(c.t.o.StopGrace):
	}
	exit := "exit status 0"
	var ee *exec.ExitError
	switch {
	case errors.As(c.waitErr, &ee):
		exit = ee.String()
	case c.waitErr != nil:
		exit = c.waitErr.Error()
	}
	c.mu.Lock()
	c.exit = exit
	calls := c.calls
	c.calls = map[string]*call{}
	c.asks = map[string]*session{}
	asked := c.stopReq
	c.mu.Unlock()
	lived := time.Since(c.started)
	if asked {
		c.t.log.Info("stdio server stopped", "process", c.n, "exit", exit, "lived", lived.Round(time.Millisecond).String())
	} else {
		c.t.log.Warn("stdio server exited", "process", c.n, "exit", exit, "lived", lived.Round(time.Millisecond).String(),
			"failed_requests", len(calls))
	}
	// Sessions end before their requests fail: a client that reads the failure and sends
	// again meets 404, never this process.
	c.t.exited(c, asked, lived)
	for _, cl := range calls {
		cl.reply <- jsonrpc.ErrorResponse(cl.origID, c.exitError())
	}
	if c.t.onExit != nil {
		c.t.onExit()
	}
	close(c.done)
}

// exitError is the error of a request the exited process cannot answer (docs/errors.md).
func (c *child) exitError() *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "UpstreamExited",
		"Upstream stdio server exited ("+c.exit+") before answering", "exit", c.exit)
}

// exitedWith is why the process ended ("" while it runs).
func (c *child) exitedWith() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exit
}
