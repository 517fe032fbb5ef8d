package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// Web API methods Tollgate calls (https://api.slack.com/methods).
const (
	methodPost     = "chat.postMessage"
	methodUpdate   = "chat.update"
	methodAuthTest = "auth.test"
	methodRespond  = "response_url" // not a Web API method: the interaction's response URL
)

func (j job) method() string {
	switch j.kind {
	case jobPost, jobPin:
		return methodPost
	case jobUpdate, jobVote:
		return methodUpdate
	}
	return methodRespond
}

// apiError is a Slack answer that is not a success: an HTTP status, or {"ok": false, "error"}.
type apiError struct {
	status     int    // HTTP status when not 2xx
	code       string // Slack's error code (e.g. channel_not_found, ratelimited)
	retryAfter time.Duration
}

func (e *apiError) Error() string {
	if e.code != "" {
		return e.code
	}
	return fmt.Sprintf("HTTP %d", e.status)
}

// retryable: network errors, HTTP 429 and 5xx, and Slack's transient error codes.
func retryable(err error) bool {
	var ae *apiError
	if !errors.As(err, &ae) {
		return true
	}
	switch ae.code {
	case "ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout":
		return true
	case "":
		return ae.status == http.StatusTooManyRequests || ae.status >= 500
	}
	return false
}

// send delivers one job, counting the outcome and recording the channel's health.
func (s *Slack) send(ctx context.Context, j job) {
	log := s.log.With("method", j.method())
	if j.task != nil {
		log = log.With("task_id", j.task.ID)
	}
	var err error
	switch j.kind {
	case jobPost:
		err = s.post(ctx, j)
	case jobUpdate, jobVote:
		if j.refresh && s.opts.Lookup != nil {
			lctx, cancel := context.WithTimeout(ctx, s.timeout)
			cur, lerr := s.opts.Lookup(lctx, j.task.ID)
			cancel()
			if lerr != nil || cur.State != tasks.AwaitingApproval {
				return // decided meanwhile: its outcome's update says what is true
			}
			j.task = cur
		}
		var done bool
		if done, err = s.update(ctx, j); !done && err == nil {
			log.Debug("slack message not updated: this process did not post it")
			return
		}
	case jobRespond:
		err = s.retry(ctx, func(ctx context.Context) error { return s.respond(ctx, j.url, j.text) })
	case jobPin:
		log = log.With("tool", j.pin.Tool)
		err = s.postPin(ctx, j)
	}
	switch {
	case err == nil:
		s.met.sent(j.method(), resultSent)
		log.Debug("slack request sent", "queued_for", time.Since(j.enqueued).String())
	case ctx.Err() != nil:
		log.Info("slack request abandoned at shutdown")
	default:
		s.met.sent(j.method(), resultFailed)
		log.Warn("slack request failed", "error", err.Error()) // Slack error codes, never the token
	}
}

func (s *Slack) post(ctx context.Context, j job) error {
	ch := j.wf.Destination.Channel
	if s.opts.BotToken == "" {
		return errors.New("no bot token")
	}
	cannot, gone := s.cannotRun(j.task), s.notWaiting(j.task)
	m := requestMessage(j.task, j.wf, s.opts.ConsoleURL, cannot, gone)
	m.Channel = ch
	var ans struct {
		Channel string `json:"channel"`
		TS      string `json:"ts"`
	}
	err := s.retry(ctx, func(ctx context.Context) error { return s.call(ctx, methodPost, m, &ans) })
	s.record(ch, methodPost, err)
	if err != nil {
		return err
	}
	if ans.Channel == "" || ans.TS == "" {
		return errors.New("chat.postMessage answered without channel or ts")
	}
	s.msgs.put(j.task.ID, msgRef{channel: ans.Channel, ts: ans.TS, shown: flagsOf(cannot, gone)})
	if s.opts.Remember == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	cur, err := s.opts.Remember(rctx, j.task.ID, tasks.MessageRef{Kind: refKind, Channel: ans.Channel, ID: ans.TS})
	cancel()
	switch {
	case err != nil:
		// This process still updates the message; after a restart it would keep its buttons.
		s.log.Warn("slack message not kept with its task", "task_id", j.task.ID, "error", err.Error())
	case cur != nil && cur.State != tasks.AwaitingApproval:
		// The wait ended while the message was being posted: show the outcome at once (the
		// change's own update, queued behind, then finds the message taken).
		if _, err := s.update(ctx, job{kind: jobUpdate, task: cur, wf: j.wf}); err != nil {
			s.log.Warn("slack message not brought up to date", "task_id", j.task.ID, "error", err.Error())
		}
	}
	return nil
}

// postPin posts a pin event's message; nothing is kept (it is never updated).
func (s *Slack) postPin(ctx context.Context, j job) error {
	ch := j.wf.Destination.Channel
	if s.opts.BotToken == "" {
		return errors.New("no bot token")
	}
	m := pinMessage(*j.pin, s.opts.ConsoleURL)
	m.Channel = ch
	err := s.retry(ctx, func(ctx context.Context) error { return s.call(ctx, methodPost, m, nil) })
	s.record(ch, methodPost, err)
	return err
}

// update replaces the task's message: by its outcome once the wait ended (the message is then
// forgotten), by the request with the votes so far after one of several approvals. The place
// is this process's memory, else the one kept with the task (posted before a restart or by
// another replica). done is false when neither knows a message for the task.
func (s *Slack) update(ctx context.Context, j job) (done bool, err error) {
	var ref msgRef
	var ok bool
	if j.kind == jobVote {
		ref, ok = s.msgs.get(j.task.ID)
	} else {
		ref, ok = s.msgs.take(j.task.ID)
	}
	if !ok {
		if kept := j.task.MessagesOf(refKind); len(kept) > 0 {
			last := kept[len(kept)-1]
			ref, ok = msgRef{channel: last.Channel, ts: last.ID}, true
		}
	}
	if !ok {
		return false, nil
	}
	if s.opts.BotToken == "" {
		return true, errors.New("no bot token")
	}
	m := outcomeMessage(j.task, j.wf, s.opts.ConsoleURL)
	if j.kind == jobVote {
		cannot, gone := s.cannotRun(j.task), s.notWaiting(j.task)
		m = requestMessage(j.task, j.wf, s.opts.ConsoleURL, cannot, gone)
		ref.shown = flagsOf(cannot, gone)
	}
	m.Channel, m.TS = ref.channel, ref.ts
	err = s.retry(ctx, func(ctx context.Context) error { return s.call(ctx, methodUpdate, m, nil) })
	s.record(j.wf.Destination.Channel, methodUpdate, err)
	if err == nil && j.kind == jobVote {
		s.msgs.put(j.task.ID, ref) // what it says now, for Refresh
	}
	return true, err
}

func (s *Slack) record(channel, method string, err error) {
	h := Health{OK: err == nil, At: time.Now()}
	if err != nil {
		h.Detail = method + ": " + err.Error()
	}
	s.health.set(channel, h)
}

// retry runs attempt up to maxAttempts times with backoff (longer when Slack sends
// Retry-After, at most maxRetryAfter), each bounded by the per-attempt timeout.
func (s *Slack) retry(ctx context.Context, attempt func(context.Context) error) error {
	var err error
	for n := 1; n <= maxAttempts; n++ {
		if n > 1 {
			wait := s.backoff[min(n-2, len(s.backoff)-1)]
			var ae *apiError
			if errors.As(err, &ae) && ae.retryAfter > wait {
				wait = min(ae.retryAfter, maxRetryAfter)
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		actx, cancel := context.WithTimeout(ctx, s.timeout)
		err = attempt(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !retryable(err) {
			return err
		}
	}
	return err
}

// call POSTs a JSON body to a Web API method with the bot token and decodes the answer into
// out (when not nil). Slack answers HTTP 200 with {"ok": false, "error": …} for most errors.
func (s *Slack) call(ctx context.Context, method string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(s.opts.APIURL, "/")+"/"+method, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer "+s.opts.BotToken)
	req.Header.Set("User-Agent", "Tollgate-Slack")
	resp, err := s.client.Do(req)
	if err != nil {
		return unwrapURL(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &apiError{status: resp.StatusCode, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"))}
	}
	var ans struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(data, &ans); err != nil {
		return fmt.Errorf("%s: answer is not JSON", method)
	}
	if !ans.OK {
		code := ans.Error
		if code == "" || len(code) > 64 {
			code = "unknown_error"
		}
		return &apiError{status: resp.StatusCode, code: code, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"))}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
	}
	return nil
}

// respond POSTs an ephemeral message to an interaction's response_url (only the clicking user
// sees it; the original message stays).
func (s *Slack) respond(ctx context.Context, responseURL, text string) error {
	b, err := json.Marshal(map[string]any{"response_type": "ephemeral", "replace_original": false, "text": text})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, responseURL, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("User-Agent", "Tollgate-Slack")
	resp, err := s.client.Do(req)
	if err != nil {
		return unwrapURL(err) // the URL itself is a capability: never in an error text
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &apiError{status: resp.StatusCode, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"))}
	}
	return nil
}

// Probe checks the bot token once with auth.test (no retry) and records the outcome for
// channel, so a wrong or missing token shows on /readyz before a call depends on it.
func (s *Slack) Probe(ctx context.Context, channel string) Health {
	if s.opts.BotToken == "" {
		h, _ := s.ChannelHealth(channel)
		return h
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := s.call(ctx, methodAuthTest, struct{}{}, nil)
	s.record(channel, methodAuthTest, err)
	h, _ := s.ChannelHealth(channel)
	return h
}

func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err // url.Error's text holds the whole URL
	}
	return err
}

// parseRetryAfter reads delay-seconds (Slack sends seconds); 0 when absent or bad.
func parseRetryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(min(n, 3600)) * time.Second
}
