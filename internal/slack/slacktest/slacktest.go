// Package slacktest is a local stand-in for Slack's Web API and response URLs that checks
// every request Tollgate sends against Slack's documented shapes (chat.postMessage,
// chat.update, auth.test, Block Kit, response_url messages) and records it. For tests only.
package slacktest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Call is one request received.
type Call struct {
	Method string         // chat.postMessage, chat.update, auth.test or response_url
	Body   map[string]any // the decoded JSON body
}

// Receiver serves Slack's Web API under URL (give it as TOLLGATE_SLACK_API_URL) and response
// URLs under ResponseURL(…).
type Receiver struct {
	URL   string
	Token string // the bot token every Web API request must carry
	// FailNext answers the next n Web API requests with HTTP 500.
	FailNext atomic.Int32

	t       testing.TB
	srv     *httptest.Server
	mu      sync.Mutex
	calls   []Call
	errs    []string
	changed chan struct{}
	seq     atomic.Int64
}

// ChannelID is the channel id chat.postMessage answers, whatever name was posted to.
const ChannelID = "C0TOLLGATE"

// NewReceiver starts a receiver on loopback; it is closed when the test ends, and the test
// fails if any request broke Slack's documented shapes.
func NewReceiver(t testing.TB, token string) *Receiver {
	r := &Receiver{Token: token, t: t, changed: make(chan struct{}, 1)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	r.URL = r.srv.URL + "/api"
	t.Cleanup(func() {
		r.srv.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.errs {
			t.Errorf("slacktest: %s", e)
		}
	})
	return r
}

// ResponseURL is a response_url for a payload; requests to it are recorded as response_url.
func (r *Receiver) ResponseURL(name string) string { return r.srv.URL + "/actions/" + name }

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var method string
	var problems []string
	bad := func(f string, a ...any) { problems = append(problems, fmt.Sprintf(f, a...)) }
	switch {
	case strings.HasPrefix(req.URL.Path, "/api/"):
		method = strings.TrimPrefix(req.URL.Path, "/api/")
		if req.Header.Get("Authorization") != "Bearer "+r.Token {
			bad("%s: Authorization is not the bot token as Bearer", method)
		}
	case strings.HasPrefix(req.URL.Path, "/actions/"):
		method = "response_url"
		if req.Header.Get("Authorization") != "" {
			bad("response_url: carries an Authorization header (the bot token must not leave for a response URL)")
		}
	default:
		bad("unexpected path %s", req.URL.Path)
	}
	if req.Method != http.MethodPost {
		bad("%s: method %s, want POST", method, req.Method)
	}
	if ct := req.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		bad("%s: Content-Type %q, want application/json", method, ct)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		bad("%s: body is not a JSON object: %v", method, err)
	}
	switch method {
	case "chat.postMessage":
		problems = append(problems, CheckMessage(m, false)...)
	case "chat.update":
		problems = append(problems, CheckMessage(m, true)...)
	case "auth.test":
	case "response_url":
		problems = append(problems, checkResponse(m)...)
	default:
		bad("unexpected Web API method %q", method)
	}
	r.mu.Lock()
	r.calls = append(r.calls, Call{Method: method, Body: m})
	r.errs = append(r.errs, problems...)
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
	if method != "response_url" && r.FailNext.Add(-1) >= 0 {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	r.FailNext.CompareAndSwap(-1, 0)
	w.Header().Set("Content-Type", "application/json")
	switch method {
	case "chat.postMessage", "chat.update":
		// Only a new message takes the next ts: an update keeps its message's, so the ts of
		// the n-th message posted is …00n whatever updates happened in between.
		ts, _ := m["ts"].(string)
		if ts == "" {
			ts = fmt.Sprintf("1700000000.%06d", r.seq.Add(1))
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": ChannelID, "ts": ts})
	case "response_url":
		_, _ = w.Write([]byte("ok"))
	default:
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true})
	}
}

// Calls returns the requests received so far for method ("" = all).
func (r *Receiver) Calls(method string) []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Call
	for _, c := range r.calls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Wait returns once n requests for method arrived, failing the test after 10 s.
func (r *Receiver) Wait(t testing.TB, method string, n int) []Call {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		if c := r.Calls(method); len(c) >= n {
			return c
		}
		select {
		case <-r.changed:
		case <-deadline.C:
			t.Fatalf("slacktest: %d %s request(s) after 10s, want %d", len(r.Calls(method)), method, n)
		}
	}
}

var allowedTop = map[string]bool{"channel": true, "ts": true, "text": true, "blocks": true}

// CheckMessage lists how m breaks the documented shape of a chat.postMessage (update false)
// or chat.update body with Block Kit blocks.
func CheckMessage(m map[string]any, update bool) []string {
	var p []string
	bad := func(f string, a ...any) { p = append(p, fmt.Sprintf(f, a...)) }
	for k := range m {
		if !allowedTop[k] {
			bad("unexpected field %q", k)
		}
	}
	if s, _ := m["channel"].(string); s == "" {
		bad("channel missing")
	}
	if s, _ := m["ts"].(string); update != (s != "") {
		bad("ts present=%v, want %v", s != "", update)
	}
	if s, _ := m["text"].(string); s == "" {
		bad("text (the notification fallback) missing")
	}
	blocks, ok := m["blocks"].([]any)
	if !ok || len(blocks) == 0 || len(blocks) > 50 {
		bad("blocks must be a non-empty array of at most 50")
	}
	for i, b := range blocks {
		bm, _ := b.(map[string]any)
		switch typ, _ := bm["type"].(string); typ {
		case "section":
			text, hasText := bm["text"].(map[string]any)
			fields, hasFields := bm["fields"].([]any)
			if !hasText && !hasFields {
				bad("blocks[%d] section has neither text nor fields", i)
			}
			if hasText {
				p = append(p, checkText(fmt.Sprintf("blocks[%d].text", i), text, 3000)...)
			}
			if len(fields) > 10 {
				bad("blocks[%d] section has %d fields, at most 10", i, len(fields))
			}
			for j, f := range fields {
				fm, _ := f.(map[string]any)
				p = append(p, checkText(fmt.Sprintf("blocks[%d].fields[%d]", i, j), fm, 2000)...)
			}
		case "actions":
			els, _ := bm["elements"].([]any)
			if len(els) == 0 || len(els) > 25 {
				bad("blocks[%d] actions needs 1 to 25 elements", i)
			}
			for j, e := range els {
				em, _ := e.(map[string]any)
				path := fmt.Sprintf("blocks[%d].elements[%d]", i, j)
				if em["type"] != "button" {
					bad("%s type %v, want button", path, em["type"])
				}
				tm, _ := em["text"].(map[string]any)
				if tm["type"] != "plain_text" {
					bad("%s text.type %v, want plain_text", path, tm["type"])
				}
				if s, _ := tm["text"].(string); s == "" || len(s) > 75 {
					bad("%s text.text must be 1 to 75 characters", path)
				}
				if s, _ := em["action_id"].(string); s == "" || len(s) > 255 {
					bad("%s action_id must be 1 to 255 characters", path)
				}
				if s, _ := em["value"].(string); s == "" || len(s) > 2000 {
					bad("%s value must be 1 to 2000 characters", path)
				}
				if s, ok := em["style"]; ok && s != "primary" && s != "danger" {
					bad("%s style %v, want primary or danger", path, s)
				}
			}
		case "context":
			els, _ := bm["elements"].([]any)
			if len(els) == 0 || len(els) > 10 {
				bad("blocks[%d] context needs 1 to 10 elements", i)
			}
			for j, e := range els {
				em, _ := e.(map[string]any)
				if em["type"] != "mrkdwn" && em["type"] != "plain_text" {
					bad("blocks[%d].elements[%d] type %v, want a text", i, j, em["type"])
				}
				if s, _ := em["text"].(string); s == "" {
					bad("blocks[%d].elements[%d] text missing", i, j)
				}
			}
		default:
			bad("blocks[%d] type %v, want section, actions or context", i, bm["type"])
		}
	}
	return p
}

func checkText(path string, m map[string]any, max int) []string {
	var p []string
	if m["type"] != "mrkdwn" && m["type"] != "plain_text" {
		p = append(p, fmt.Sprintf("%s type %v, want mrkdwn or plain_text", path, m["type"]))
	}
	if s, _ := m["text"].(string); s == "" || len([]rune(s)) > max {
		p = append(p, fmt.Sprintf("%s text must be 1 to %d characters", path, max))
	}
	return p
}

func checkResponse(m map[string]any) []string {
	var p []string
	if m["response_type"] != "ephemeral" {
		p = append(p, fmt.Sprintf("response_url: response_type %v, want ephemeral", m["response_type"]))
	}
	if s, _ := m["text"].(string); s == "" {
		p = append(p, "response_url: text missing")
	}
	return p
}

// Blocks returns the blocks of type typ in a message body.
func Blocks(body map[string]any, typ string) []map[string]any {
	var out []map[string]any
	bs, _ := body["blocks"].([]any)
	for _, b := range bs {
		if bm, _ := b.(map[string]any); bm["type"] == typ {
			out = append(out, bm)
		}
	}
	return out
}

// Text is every text of a message body joined, for substring checks.
func Text(body map[string]any) string {
	b, _ := json.Marshal(body)
	var s strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range []string{"text"} {
				if t, ok := x[k].(string); ok {
					s.WriteString(t + "\n")
				}
			}
			for _, vv := range x {
				walk(vv)
			}
		case []any:
			for _, vv := range x {
				walk(vv)
			}
		}
	}
	var m any
	_ = json.Unmarshal(b, &m)
	walk(m)
	return s.String()
}

// Click is the form body Slack POSTs when user clicks the button actionID (value taskID) of
// the message at channel/ts: application/x-www-form-urlencoded with a block_actions payload.
func Click(user, actionID, taskID, channel, ts, responseURL string) []byte {
	p := map[string]any{
		"type":         "block_actions",
		"user":         map[string]any{"id": user, "username": strings.ToLower(user), "team_id": "T0TOLLGATE"},
		"api_app_id":   "A0TOLLGATE",
		"team":         map[string]any{"id": "T0TOLLGATE", "domain": "example"},
		"container":    map[string]any{"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": false},
		"channel":      map[string]any{"id": channel, "name": "approvals"},
		"message":      map[string]any{"type": "message", "ts": ts, "text": "Tollgate: approval needed"},
		"trigger_id":   "123.456.abc",
		"response_url": responseURL,
		"actions": []any{map[string]any{
			"type": "button", "action_id": actionID, "block_id": "tollgate_decision", "value": taskID,
			"text": map[string]any{"type": "plain_text", "text": "Approve"}, "action_ts": ts,
		}},
	}
	b, _ := json.Marshal(p)
	return []byte("payload=" + url.QueryEscape(string(b)))
}

// Signed is the X-Slack-Request-Timestamp and X-Slack-Signature Slack sends with body at ts.
func Signed(secret string, ts time.Time, body []byte) http.Header {
	stamp := strconv.FormatInt(ts.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + stamp + ":"))
	m.Write(body)
	return http.Header{
		"Content-Type":              {"application/x-www-form-urlencoded"},
		"X-Slack-Request-Timestamp": {stamp},
		"X-Slack-Signature":         {"v0=" + hex.EncodeToString(m.Sum(nil))},
	}
}
