package tasks

import (
	"context"
	"errors"
)

// MessageRef is a message an approval channel posted about a task: the channel's kind
// ("slack"), where it was posted and the channel's own id for it (Slack: the channel id and
// the message ts). It is kept with the task so the message is brought up to date when the
// wait ends even if the process that posted it restarted meanwhile or another replica
// sharing the store decided.
type MessageRef struct {
	Kind    string `json:"kind"`
	Channel string `json:"channel"`
	ID      string `json:"id"`
}

// maxMessages bounds the messages kept per task (a workflow posts to one channel; a click on
// a stale copy may name another).
const maxMessages = 4

// NoteMessage records on task id that ref was posted about it, replacing the ref of the same
// kind and channel, and returns the task as it now is. It is bookkeeping, not a change of the
// task: nothing is published and UpdatedAt stays. A task no longer awaiting a decision is left
// as it is and returned so (its wait ended while the message was being posted: the caller
// brings the message up to date itself). Past maxMessages the oldest ref is forgotten.
func (m *Manager) NoteMessage(ctx context.Context, id string, ref MessageRef) (*Task, error) {
	if ref.Kind == "" || ref.Channel == "" || ref.ID == "" {
		return nil, errors.New("note message: empty kind, channel or id")
	}
	t, err := m.write(ctx, id, func(t *Task) error {
		if t.State != AwaitingApproval {
			return errNoop
		}
		for i, r := range t.Messages {
			if r.Kind == ref.Kind && r.Channel == ref.Channel {
				if r == ref {
					return errNoop
				}
				t.Messages[i] = ref
				return nil
			}
		}
		if len(t.Messages) >= maxMessages {
			t.Messages = t.Messages[1:]
		}
		t.Messages = append(t.Messages, ref)
		return nil
	}, true)
	if errors.Is(err, errNoop) {
		return t, nil
	}
	return t, err
}

// Mine reports whether this process created t (with a store only it uses, every task). Work a
// task's creator owes it after a restart — posting its approval message — is done by it alone.
func (m *Manager) Mine(t *Task) bool {
	return !m.shared || t.Replica == "" || t.Replica == m.opts.Replica
}

// MessagesOf returns the refs of kind kept on t.
func (t *Task) MessagesOf(kind string) []MessageRef {
	var out []MessageRef
	for _, r := range t.Messages {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}
