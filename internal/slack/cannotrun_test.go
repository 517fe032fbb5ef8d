package slack

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/slack/slacktest"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// TestCannotRunInMessage: a request whose call can no longer run is posted saying so, with
// Reject alone; a call that becomes unable to run later has its message updated (Refresh) the
// same way, buttons and all, while it is still pending. Every request is checked against
// Slack's documented shapes by the stand-in receiver. Fails on main (no flag, both buttons).
func TestCannotRunInMessage(t *testing.T) {
	f := newFixture(t)
	f.cannot = map[string]*tasks.Unrunnable{"tg_dead": {Reason: tasks.UnrunnableStdioExited, Message: "The stdio server process exited"}}
	dead := heldTask("tg_dead")
	f.s.OnTaskChange(tasks.Transition{To: tasks.AwaitingApproval, Task: dead})
	post := f.recv.Wait(t, "chat.postMessage", 1)[0].Body
	if text := slacktest.Text(post); !strings.Contains(text, "Cannot run any more") || !strings.Contains(text, "stdio_process_exited") {
		t.Errorf("posted request does not say it cannot run:\n%s", text)
	}
	if raw, _ := json.Marshal(post); strings.Contains(string(raw), ActionApprove) || !strings.Contains(string(raw), ActionReject) {
		t.Errorf("a call that cannot run is offered Approve (or lost Reject):\n%s", raw)
	}

	// Posted while it could run; told when that changed.
	later := heldTask("tg_later")
	f.s.OnTaskChange(tasks.Transition{To: tasks.AwaitingApproval, Task: later})
	post = f.recv.Wait(t, "chat.postMessage", 2)[1].Body
	if text := slacktest.Text(post); strings.Contains(text, "Cannot run") {
		t.Fatalf("flagged before anything was known:\n%s", text)
	}
	f.mu.Lock()
	f.cannot["tg_later"] = &tasks.Unrunnable{Reason: tasks.UnrunnableToolQuarantined, Message: "The definition of tool changed"}
	f.mu.Unlock()
	f.s.Refresh(later)
	upd := f.recv.Wait(t, "chat.update", 1)[0].Body
	if upd["channel"] != slacktest.ChannelID || upd["ts"] == "" {
		t.Errorf("chat.update channel %v ts %v, want the posted message's", upd["channel"], upd["ts"])
	}
	if text := slacktest.Text(upd); !strings.Contains(text, "Cannot run any more") || !strings.Contains(text, "tool_quarantined") {
		t.Errorf("updated request does not say it cannot run:\n%s", text)
	}
	if raw, _ := json.Marshal(upd); strings.Contains(string(raw), ActionApprove) {
		t.Errorf("updated request still offers Approve:\n%s", raw)
	}
	// Refreshed again with nothing new, and as a decided task: neither is sent; the next
	// update is the outcome's. (Once the update is recorded as sent: Slack's answer came.)
	waitFor(t, func() bool { r, _ := f.s.msgs.get("tg_later"); return r.shown == tasks.UnrunnableToolQuarantined })
	f.s.Refresh(later)
	done := *later
	done.State, done.Decision = tasks.Rejected, &tasks.Decision{By: "alice", At: time.Now()}
	f.s.Refresh(&done)
	f.s.OnTaskChange(tasks.Transition{From: tasks.AwaitingApproval, To: tasks.Rejected, Task: &done})
	if text := slacktest.Text(f.recv.Wait(t, "chat.update", 2)[1].Body); !strings.Contains(text, "Rejected by alice") {
		t.Errorf("the update after an unchanged refresh is not the outcome:\n%s", text)
	}
}

// TestPreviousRejectionInMessage: the request for a call rejected before (and told) names
// who rejected it, when and why. Fails on main (the message did not show it).
func TestPreviousRejectionInMessage(t *testing.T) {
	f := newFixture(t)
	again := heldTask("tg_again")
	at := time.Date(2026, 11, 27, 9, 30, 0, 0, time.UTC)
	again.PreviousRejection = &tasks.PreviousRejection{TaskID: "tg_first", By: "dave", Reason: "wrong <@U0EVE> account", At: at}
	f.s.OnTaskChange(tasks.Transition{To: tasks.AwaitingApproval, Task: again})
	text := slacktest.Text(f.recv.Wait(t, "chat.postMessage", 1)[0].Body)
	for _, want := range []string{"Rejected before", "dave", "2026-11-27 09:30:00 UTC", "tg_first", "wrong &lt;@U0EVE&gt; account"} {
		if !strings.Contains(text, want) {
			t.Errorf("request lacks %q:\n%s", want, text)
		}
	}
}

// TestNotWaitingInMessage: when nobody waits for a held call any more, its request is updated
// (Refresh) to say so and how long the result is kept; its buttons stay (approving still runs
// the call, for the same call made again). Fails on main (no such line).
func TestNotWaitingInMessage(t *testing.T) {
	f := newFixture(t)
	held := heldTask("tg_held")
	f.s.OnTaskChange(tasks.Transition{To: tasks.AwaitingApproval, Task: held})
	if text := slacktest.Text(f.recv.Wait(t, "chat.postMessage", 1)[0].Body); strings.Contains(text, "no longer waiting") {
		t.Fatalf("posted saying nobody waits:\n%s", text)
	}
	f.mu.Lock()
	f.gone = map[string]*tasks.NotWaiting{"tg_held": {ResultKeptUntil: time.Now().Add(20 * time.Minute), Message: "Requester no longer waiting; the result will be kept for 20m"}}
	f.mu.Unlock()
	f.s.Refresh(held)
	upd := f.recv.Wait(t, "chat.update", 1)[0].Body
	if text := slacktest.Text(upd); !strings.Contains(text, "Requester no longer waiting; the result will be kept for 20m") {
		t.Errorf("update does not say nobody waits:\n%s", text)
	}
	if raw, _ := json.Marshal(upd); !strings.Contains(string(raw), ActionApprove) || !strings.Contains(string(raw), ActionReject) {
		t.Errorf("a call nobody waits for lost its buttons:\n%s", raw)
	}
}
