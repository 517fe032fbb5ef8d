package tasks

import (
	"context"
	"fmt"
	"testing"
)

// TestNoteMessage: a posted message's place is kept with a pending task without publishing a
// transition or touching UpdatedAt; the same channel's ref is replaced, at most maxMessages
// are kept (oldest forgotten), and a task no longer awaiting a decision is left alone.
func TestNoteMessage(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	tk := e.create(t, "alice")
	published := 0
	e.m.Subscribe(func(Transition) { published++ })

	ref := MessageRef{Kind: "slack", Channel: "C1", ID: "1.1"}
	if _, err := e.m.NoteMessage(ctx, tk.ID, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.NoteMessage(ctx, tk.ID, MessageRef{Kind: "slack", Channel: "C1", ID: "1.2"}); err != nil {
		t.Fatal(err)
	}
	got, _ := e.m.Lookup(ctx, tk.ID)
	if len(got.Messages) != 1 || got.Messages[0].ID != "1.2" || !got.UpdatedAt.Equal(tk.UpdatedAt) {
		t.Fatalf("after two notes on one channel: %+v, updated %v (was %v)", got.Messages, got.UpdatedAt, tk.UpdatedAt)
	}
	for i := range maxMessages + 2 {
		if _, err := e.m.NoteMessage(ctx, tk.ID, MessageRef{Kind: "slack", Channel: fmt.Sprint("D", i), ID: "2.0"}); err != nil {
			t.Fatal(err)
		}
	}
	got, _ = e.m.Lookup(ctx, tk.ID)
	if len(got.Messages) != maxMessages || got.Messages[maxMessages-1].Channel != fmt.Sprint("D", maxMessages+1) || len(got.MessagesOf("slack")) != maxMessages || len(got.MessagesOf("email")) != 0 {
		t.Fatalf("bounded refs: %+v", got.Messages)
	}
	if published != 0 {
		t.Fatalf("%d transitions published for bookkeeping", published)
	}
	if _, err := e.m.NoteMessage(ctx, tk.ID, MessageRef{Kind: "slack"}); err == nil {
		t.Error("an empty ref was accepted")
	}

	if _, err := e.m.Cancel(ctx, "alice", tk.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.NoteMessage(ctx, tk.ID, MessageRef{Kind: "slack", Channel: "C9", ID: "9.9"}); err != nil {
		t.Fatal(err)
	}
	if got, _ = e.m.Lookup(ctx, tk.ID); len(got.MessagesOf("slack")) != maxMessages || got.Messages[0].Channel == "C9" {
		t.Fatalf("a finished task got a ref: %+v", got.Messages)
	}
}
