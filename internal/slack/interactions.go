package slack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/mrkdwn"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// InteractionsPath is the admin route Slack's interactivity requests are sent to.
const InteractionsPath = "/api/v1/slack/interactions"

// Signature checking, as Slack documents it ("Verifying requests from Slack").
const (
	// SignatureWindow: a request whose X-Slack-Request-Timestamp is further than this from
	// the local clock is refused (stale, or a replay of an old one).
	SignatureWindow = 5 * time.Minute
	// MaxInteractionBytes bounds a callback body (a block_actions payload carries the message).
	MaxInteractionBytes = 256 << 10
	// MaxReplayEntries bounds the signatures remembered within the window; when full of
	// unexpired ones, new callbacks are refused (503) rather than replays let through.
	MaxReplayEntries = 10000
	signatureVersion = "v0"
)

// Refusal reasons, the reason label of tollgate_slack_interactions_refused_total.
const (
	ReasonDisabled     = "disabled"       // no signing secret configured
	ReasonTooLarge     = "too_large"      // body over MaxInteractionBytes
	ReasonBadSignature = "bad_signature"  // missing, malformed or wrong X-Slack-Signature
	ReasonStale        = "stale"          // timestamp missing, malformed or outside the window
	ReasonReplay       = "replay"         // the same signature seen within the window
	ReasonReplayFull   = "replay_full"    // MaxReplayEntries unexpired signatures held
	ReasonMalformed    = "malformed"      // signed, but not a block_actions payload Tollgate can read
	ReasonUnmapped     = "unmapped_user"  // the Slack user is no approver's slack_user_id
	ReasonSelf         = "self_approval"  // the approver requested the call
	ReasonNotAllowed   = "not_authorized" // the approver is outside the workflow's approvers (ErrNotAuthorized)
	ReasonNotPending   = "not_pending"    // decided, ended or unknown task
	ReasonError        = "error"          // the decision failed otherwise
	// ReasonForeignMessage: the clicked message is not one Tollgate posted for the task (its
	// channel and ts are not those recorded with the task), or the task's workflow does not
	// post to Slack.
	ReasonForeignMessage = "foreign_message"
	ReasonTruncated      = "truncated" // the call is too large for Slack: decided in the console only
)

// Sign returns the v0 signature of body sent at timestamp (unix seconds): "v0=" + hex
// HMAC-SHA256 over "v0:{timestamp}:{body}" keyed with the signing secret.
func Sign(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(signatureVersion + ":" + timestamp + ":"))
	m.Write(body)
	return signatureVersion + "=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a request's X-Slack-Request-Timestamp and X-Slack-Signature against body at
// now. It returns "" when authentic, else the refusal reason.
func Verify(secret, timestamp, signature string, body []byte, now time.Time) string {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || timestamp == "" || timestamp[0] == '+' {
		return ReasonStale
	}
	if d := now.Sub(time.Unix(ts, 0)); d > SignatureWindow || d < -SignatureWindow {
		return ReasonStale
	}
	want := Sign(secret, timestamp, body)
	// constant time; hmac.Equal also compares lengths without leaking the content
	if !hmac.Equal([]byte(signature), []byte(want)) {
		return ReasonBadSignature
	}
	return ""
}

// replayCache remembers authentic signatures until their timestamp leaves the window.
type replayCache struct {
	mu sync.Mutex
	m  map[string]time.Time // signature → when it can no longer verify
}

// admit records sig until expires; false when it is already there (a replay) or the cache is
// full of unexpired signatures (full).
func (c *replayCache) admit(sig string, expires, now time.Time) (ok bool, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]time.Time{}
	}
	if exp, seen := c.m[sig]; seen && now.Before(exp) {
		return false, ReasonReplay
	}
	if len(c.m) >= MaxReplayEntries {
		for k, exp := range c.m {
			if !now.Before(exp) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= MaxReplayEntries {
			return false, ReasonReplayFull
		}
	}
	c.m[sig] = expires
	return true, ""
}

// payload is the part of a block_actions interaction Tollgate reads.
type payload struct {
	Type string `json:"type"`
	User struct {
		ID string `json:"id"`
	} `json:"user"`
	Container struct {
		ChannelID string `json:"channel_id"`
		MessageTS string `json:"message_ts"`
	} `json:"container"`
	Channel struct {
		ID string `json:"id"`
	} `json:"channel"`
	ResponseURL string `json:"response_url"`
	Actions     []struct {
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
	} `json:"actions"`
}

// Interactions is the handler of POST /api/v1/slack/interactions: Slack's interactivity
// requests, signed with the app's signing secret. It answers 200 to every authentic request
// (Slack shows an error to the user otherwise) and tells the clicking user through the
// payload's response_url when the click decided nothing.
func (s *Slack) Interactions() http.Handler {
	return http.HandlerFunc(s.interact)
}

func (s *Slack) refuse(w http.ResponseWriter, status int, reason, msg string) {
	s.met.refused(reason)
	if reason != ReasonDisabled {
		s.log.Warn("slack interaction refused", "reason", reason) // never the body or headers
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintln(w, msg)
}

func (s *Slack) interact(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if s.opts.SigningSecret == "" {
		s.refuse(w, http.StatusNotFound, ReasonDisabled, "Slack interactivity is not enabled (TOLLGATE_SLACK_SIGNING_SECRET)")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxInteractionBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			s.refuse(w, http.StatusRequestEntityTooLarge, ReasonTooLarge, "request body too large")
			return
		}
		s.refuse(w, http.StatusBadRequest, ReasonMalformed, "reading request body failed")
		return
	}
	now := s.now()
	tsHeader := r.Header.Get("X-Slack-Request-Timestamp")
	sig := r.Header.Get("X-Slack-Signature")
	if reason := Verify(s.opts.SigningSecret, tsHeader, sig, body, now); reason != "" {
		s.refuse(w, http.StatusUnauthorized, reason, "request signature not valid")
		return
	}
	ts, _ := strconv.ParseInt(tsHeader, 10, 64)
	if ok, reason := s.replays.admit(sig, time.Unix(ts, 0).Add(SignatureWindow+time.Second), now); !ok {
		status := http.StatusUnauthorized
		if reason == ReasonReplayFull {
			status = http.StatusServiceUnavailable
		}
		s.refuse(w, status, reason, "request refused")
		return
	}
	p, err := parsePayload(r.Header.Get("Content-Type"), body)
	if err != nil {
		s.refuse(w, http.StatusBadRequest, ReasonMalformed, err.Error())
		return
	}
	id, approve, found := decisionOf(p)
	if !found {
		w.WriteHeader(http.StatusOK) // another interaction of the app: nothing for Tollgate
		return
	}
	approver, ok := "", false
	if s.opts.Approver != nil {
		approver, ok = s.opts.Approver(p.User.ID)
	}
	if !ok {
		s.met.refused(ReasonUnmapped)
		s.log.Warn("slack interaction refused", "reason", ReasonUnmapped, "slack_user", clip(p.User.ID), "task_id", clip(id))
		s.tell(p, "You are not a Tollgate approver: no approvers[].slack_user_id lists your Slack member id ("+mrkdwn.Escape(clip(p.User.ID))+"). Nothing was decided.")
		w.WriteHeader(http.StatusOK)
		return
	}
	if s.opts.Decide == nil || s.opts.Lookup == nil {
		s.refuse(w, http.StatusServiceUnavailable, ReasonError, "decisions are not wired")
		return
	}
	// The click must come from a message Tollgate posted for this task, in a workflow that
	// posts to Slack, showing the whole call: the button's value is only a task id, and the
	// (channel, ts) of the clicked message is checked against the places Tollgate recorded
	// when it posted (in memory, and kept with the task for restarts and other replicas).
	if reason, text := s.checkMessage(r.Context(), id, firstOf(p.Container.ChannelID, p.Channel.ID), p.Container.MessageTS); reason != "" {
		s.met.refused(reason)
		s.log.Warn("slack interaction refused", "reason", reason, "slack_user", clip(p.User.ID), "task_id", clip(id))
		s.tell(p, text)
		w.WriteHeader(http.StatusOK)
		return
	}
	t, err := s.opts.Decide(r.Context(), id, approver, approve, "decided in Slack")
	if err != nil {
		reason, text := s.explain(id, err)
		s.met.refused(reason)
		if ce, ok := errors.AsType[*tasks.ConflictError](err); ok && ce.Task != nil && ce.Task.State != tasks.AwaitingApproval {
			// Decided or ended already: bring the clicked message up to date (it may predate a
			// restart, or the decision may have been committed by another replica).
			if wf, ok := s.workflow(ce.Task.Workflow); ok && Uses(wf) {
				s.enqueue(job{kind: jobUpdate, task: ce.Task, wf: wf})
			}
		}
		s.log.Info("slack decision not recorded", "reason", reason, "task_id", clip(id), "approver", approver)
		s.tell(p, text)
		w.WriteHeader(http.StatusOK)
		return
	}
	// The message itself is updated by OnTaskChange, as for a decision made anywhere else.
	s.log.Info("approval decided", "task", t.ID, "tool", t.Tool, "approver", approver, "approved", approve, "channel", "slack")
	w.WriteHeader(http.StatusOK)
}

// checkMessage says why a click on the message at (channel, ts) may not decide task id, or ""
// when it may: the task's workflow posts to Slack, the message is one Tollgate posted for the
// task, and it carried buttons (the request was shown whole).
func (s *Slack) checkMessage(ctx context.Context, id, channel, ts string) (reason, text string) {
	t, err := s.opts.Lookup(ctx, id)
	if err != nil {
		return s.explain(id, err)
	}
	wf, ok := s.workflow(t.Workflow)
	if !ok || !Uses(wf) {
		return ReasonForeignMessage, "This call's workflow does not take decisions in Slack; use the approvals console. Nothing was decided."
	}
	ours := false
	if ref, ok := s.msgs.get(id); ok && ref.channel == channel && ref.ts == ts {
		ours = true
	}
	for _, m := range t.MessagesOf(refKind) {
		ours = ours || (m.Channel == channel && m.ID == ts)
	}
	if !ours || channel == "" || ts == "" {
		return ReasonForeignMessage, "This message is not the one Tollgate posted for this call; use the approvals console. Nothing was decided."
	}
	if t.State == tasks.AwaitingApproval && truncated(t, wf) {
		return ReasonTruncated, "This call is too large to show in Slack in full: decide it in the approvals console. Nothing was decided."
	}
	return "", ""
}

// explain turns a decision error into a refusal reason and what the clicking user is told.
func (s *Slack) explain(id string, err error) (reason, text string) {
	if ce, ok := errors.AsType[*tasks.ConflictError](err); ok {
		msg := "This call is no longer awaiting approval."
		if ce.Task != nil && ce.Task.Decision != nil {
			msg = fmt.Sprintf("This call was already %s by %s.", decisionWord(ce.Task.Decision.Approved), mrkdwn.Escape(ce.Task.Decision.By))
		}
		return ReasonNotPending, msg
	}
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return ReasonNotPending, "This call is no longer known to Tollgate (expired or removed)."
	case errors.Is(err, tasks.ErrSelfApproval):
		return ReasonSelf, "You requested this call: someone else must decide it. Nothing was decided."
	}
	if errors.Is(err, ErrNotAuthorized) {
		return ReasonNotAllowed, "You may not decide this call (" + mrkdwn.Escape(err.Error()) + "). Nothing was decided."
	}
	s.log.Error("slack decision failed", "task_id", clip(id), "err", err)
	return ReasonError, "Tollgate could not record your decision; see the gateway log. Nothing was decided."
}

// ErrNotAuthorized is wrapped by an Options.Decide error when the approver may not decide the
// call (approval.<name>.approvers); the clicking user is told why.
var ErrNotAuthorized = errors.New("not authorized")

func decisionWord(approved bool) string {
	if approved {
		return "approved"
	}
	return "rejected"
}

// tell queues an ephemeral answer to the clicking user.
func (s *Slack) tell(p payload, text string) {
	u, err := url.Parse(p.ResponseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return // nowhere to answer; the refusal is logged and counted already
	}
	s.enqueue(job{kind: jobRespond, url: p.ResponseURL, text: text})
}

// parsePayload reads the form's payload field: the JSON of a block_actions interaction.
func parsePayload(contentType string, body []byte) (payload, error) {
	var p payload
	if mt, _, _ := mime.ParseMediaType(contentType); mt != "application/x-www-form-urlencoded" {
		return p, errors.New("want Content-Type application/x-www-form-urlencoded")
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || len(form["payload"]) != 1 {
		return p, errors.New("want one payload form field")
	}
	if err := json.Unmarshal([]byte(form.Get("payload")), &p); err != nil {
		return p, errors.New("payload is not JSON")
	}
	return p, nil
}

// decisionOf finds Tollgate's button among the payload's actions.
func decisionOf(p payload) (id string, approve, found bool) {
	if p.Type != "block_actions" {
		return "", false, false
	}
	for _, a := range p.Actions {
		switch a.ActionID {
		case ActionApprove:
			return a.Value, true, a.Value != ""
		case ActionReject:
			return a.Value, false, a.Value != ""
		}
	}
	return "", false, false
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// clip bounds a client-chosen string before it is logged.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) > 64 {
		return mrkdwn.Truncate(s, 64)
	}
	return s
}

func (s *Slack) workflow(name string) (config.Workflow, bool) {
	if s.opts.Workflow == nil {
		return config.Workflow{}, false
	}
	return s.opts.Workflow(name)
}
