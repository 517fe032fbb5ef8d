package notify

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/pins"
)

// poisonedChange is a quarantine whose new description tries to break out of Slack's markup
// (a link, a mention, a code fence) and is long enough to be cut.
func poisonedChange(first bool) pins.Event {
	old := []byte(`{"description":"Deploys.","name":"deploy"}`)
	cur := []byte(`{"description":"Deploys. <https://evil.example|click> <!channel> ` + "```" + ` & ` + strings.Repeat("y", 3000) + `","name":"deploy"}`)
	return pins.Event{Kind: pins.StatusQuarantined, Tool: "deploy", Digest: "sha256:new", AcceptedDigest: "sha256:old",
		Reason: pins.ReasonChanged, First: first, Changes: 1, At: created, Diff: pins.Diff(old, cur)}
}

// TestPinWebhook: a quarantine is sent once (a later change of the same quarantine is not),
// with a bounded diff summary and the console's pins link; accept says who.
func TestPinWebhook(t *testing.T) {
	r := newReceiver(t, nil)
	f := newFixture(t, nil, true)
	if f.n.OnPinEvent(poisonedChange(false), hook(r.srv.URL)) {
		t.Fatal("a later change of an ongoing quarantine was queued")
	}
	if !f.n.OnPinEvent(poisonedChange(true), hook(r.srv.URL)) {
		t.Fatal("the quarantine was not queued")
	}
	if f.n.OnPinEvent(poisonedChange(true), config.Workflow{Destination: config.Destination{Type: config.DestinationConsole}}) {
		t.Fatal("queued for a console workflow")
	}
	d := r.next(t)
	var w PinWebhook
	if err := json.Unmarshal(d.body, &w); err != nil {
		t.Fatal(err)
	}
	if w.Event != EventPinQuarantined || w.Tool != "deploy" || w.Digest != "sha256:new" || w.AcceptedDigest != "sha256:old" ||
		w.Reason != "changed" || w.ConsoleURL != console+"#pins" || w.DeliveryID == "" || d.header.Get("Content-Type") != "application/json" {
		t.Fatalf("body %s", d.body)
	}
	if len(w.Diff) < 3 || w.Diff[0] != "description:" || !strings.HasPrefix(w.Diff[1], `  - "Deploys."`) || !w.DiffTruncated {
		t.Fatalf("diff summary %q (truncated %v)", w.Diff, w.DiffTruncated)
	}
	for _, l := range w.Diff {
		if len([]rune(l)) > webhookDiffLine {
			t.Fatalf("diff line of %d runes", len([]rune(l)))
		}
	}
	acc := pins.Event{Kind: "accepted", Tool: "deploy", Digest: "sha256:new", By: "alice", At: created.Add(time.Minute)}
	f.n.OnPinEvent(acc, hook(r.srv.URL))
	d = r.next(t)
	if err := json.Unmarshal(d.body, &w); err != nil {
		t.Fatal(err)
	}
	if w.Event != EventPinAccepted || w.By != "alice" || w.At != "2025-11-25T10:01:00.000Z" || w.Diff == nil {
		t.Fatalf("accept body %s", d.body)
	}
}

// TestPinSlackBody: the diff summary is one escaped code block (no link, mention or fence of
// the upstream's survives), bounded, with a console link and no buttons.
func TestPinSlackBody(t *testing.T) {
	e := poisonedChange(true)
	b, err := pinSlackBody(item{event: EventPinQuarantined, pin: &e, wf: slack("http://x")}, console)
	if err != nil {
		t.Fatal(err)
	}
	var s Slack
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Blocks) != 4 || s.Blocks[2].Text == nil || s.Blocks[3].Type != "context" {
		t.Fatalf("blocks %s", b)
	}
	diff := s.Blocks[2].Text.Text
	if strings.Count(diff, "```") != 2 || strings.Contains(diff, "<https") || strings.Contains(diff, "<!channel>") ||
		!strings.Contains(diff, "&lt;!channel&gt;") || !strings.Contains(diff, "&amp;") || len(diff) > slackArgsMax+100 {
		t.Fatalf("diff block not escaped or not bounded (%d bytes): %.300q", len(diff), diff)
	}
	if !strings.Contains(s.Text, "Tool definition changed") || !strings.Contains(s.Blocks[3].Elements[0].Text, "<"+console+"#pins|") {
		t.Fatalf("title or link: %q %q", s.Text, s.Blocks[3].Elements[0].Text)
	}
	if strings.Contains(string(b), `"actions"`) || strings.Contains(string(b), `"button"`) {
		t.Fatal("buttons in a pin message")
	}
	rej := pins.Event{Kind: pins.StatusRejected, Tool: "deploy", Digest: "sha256:new", By: "<@U1> bob", At: created}
	b, _ = pinSlackBody(item{event: EventPinRejected, pin: &rej, wf: slack("http://x")}, "")
	if !strings.Contains(string(b), "rejected by &lt;@U1&gt; bob") || strings.Contains(string(b), "<@U1>") {
		t.Fatalf("reject body %s", b)
	}
}
