package intercept

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/era"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// The upstream's notifications/progress and notifications/message during an approved call
// (tasks.Note) reach its caller as they would without Tollgate (docs/contract.md §3
// "Progress after approval"): a held call's on its own open stream, under the progressToken
// of that request; a 2025-11-25 task call's on tasks/result or the session's stream, under the
// token of the request that created the task, with the related-task _meta.

// heldProgress is what a held call's stream says about progress: Tollgate's own
// notifications while the call waits (tick), then the upstream's once it runs (note).
type heldProgress struct {
	emit  func([]byte) bool
	token json.RawMessage // the request's progressToken; nil: it asked for none
	logs  bool            // the request takes log messages
	msg   string          // Tollgate's own message, encoded
	meta  string          // Tollgate's own _meta
	n     int             // Tollgate's own notifications so far
	sent  float64         // the last progress value written on the stream
	// upstream: the upstream's progress has begun, Tollgate's own ends. shift raises the
	// upstream's values past Tollgate's own (spec basic/utilities/progress: the value MUST
	// increase with each notification); total is raised by the same amount.
	upstream bool
	shift    float64
}

// newHeldProgress returns the progress of held call x's stream.
func newHeldProgress(x *Exchange, emit func([]byte) bool, status string, budget time.Duration, meta string) *heldProgress {
	p := &heldProgress{emit: emit, token: progressToken(x.Msg.Params), meta: meta, logs: true,
		msg: string(rawString(fmt.Sprintf("%s; held up to %s", status, budget)))}
	if x.Modern != nil {
		// spec 2026-07-28: log messages only for a request that set a level in its _meta
		p.logs = jsonrpc.Member(jsonrpc.Member(x.Msg.Params, "_meta"), era.MetaLogLevel) != nil
	}
	return p
}

// tick sends Tollgate's own next progress notification; false when it sends no more (no
// token, the upstream's progress has begun, the client went away).
func (p *heldProgress) tick() bool {
	if p.token == nil || p.upstream {
		return false
	}
	p.n++
	p.sent = float64(p.n)
	return p.emit([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + string(p.token) +
		`,"progress":` + strconv.Itoa(p.n) + `,"message":` + p.msg + `,"_meta":` + p.meta + `}}`))
}

// note writes one of the upstream's notifications on the stream; false when the stream can
// carry no more.
func (p *heldProgress) note(n tasks.Note) bool {
	switch {
	case n.Method == tasks.MethodLog && p.logs:
		return p.emit(jsonrpc.Notification(n.Method, n.Params))
	case n.Method == tasks.MethodProgress && p.token != nil:
		v, ok := progressValue(n.Params)
		if !ok {
			return true
		}
		if !p.upstream {
			p.upstream = true
			if p.n > 0 && v <= p.sent {
				p.shift = p.sent - v + 1
			}
		}
		params, ok := retoken(n.Params, p.token, p.shift)
		if !ok {
			return true
		}
		p.sent = max(p.sent, v+p.shift)
		return p.emit(jsonrpc.Notification(n.Method, params))
	}
	return true
}

// TaskNote is the upstream's notification n during task t's call as the caller of a
// 2025-11-25 task-augmented call gets it: progress under the token of the request that created
// the task (spec 2025-11-25 tasks "Task Progress Notifications"), both with the related-task
// _meta ("Associating Task-Related Messages"). Nil when it is not for that caller: progress
// without a token, or a task no task-augmented request of that era created.
func TaskNote(t *tasks.Task, n tasks.Note) []byte {
	if t.Era != "" || t.IdemKey != "" {
		return nil // a held call's (its own stream) or a 2026-07-28 task's (tasks extension: none)
	}
	return taskNote(t, n)
}

func taskNote(t *tasks.Task, n tasks.Note) []byte {
	params := n.Params
	if n.Method == tasks.MethodProgress {
		if t.ProgressToken == nil {
			return nil
		}
		var ok bool
		if params, ok = retoken(params, t.ProgressToken, 0); !ok {
			return nil
		}
	}
	out := withRelatedTask(params, t.ID)
	return jsonrpc.Notification(n.Method, out)
}

// progressValue reads params.progress.
func progressValue(params json.RawMessage) (float64, bool) {
	var v float64
	err := json.Unmarshal(jsonrpc.Member(params, "progress"), &v)
	return v, err == nil
}

// retoken returns progress params with token as progressToken and progress (and total, when
// a number) raised by shift; the other members keep their bytes.
func retoken(params, token json.RawMessage, shift float64) (json.RawMessage, bool) {
	out, err := jsonrpc.Replace(params, "progressToken", token)
	if err != nil {
		return nil, false
	}
	if shift == 0 {
		return out, true
	}
	for _, k := range []string{"progress", "total"} {
		var v float64
		if json.Unmarshal(jsonrpc.Member(out, k), &v) != nil {
			continue
		}
		if out, err = jsonrpc.Replace(out, k, []byte(strconv.FormatFloat(v+shift, 'f', -1, 64))); err != nil {
			return nil, false
		}
	}
	return out, true
}
