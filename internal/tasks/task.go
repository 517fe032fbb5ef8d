package tasks

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-mcp/tollgate/internal/identity"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// IDPrefix marks ids of tasks Tollgate owns (docs/contract.md §2 routing).
const IDPrefix = "tg_"

// NewID returns "tg_" + a random (crypto/rand) UUIDv4.
func NewID() string { return IDPrefix + uuid.NewString() }

// Decision is an approver's (or the timeout's) verdict on a task.
type Decision struct {
	Approved bool      `json:"approved"`
	By       string    `json:"by"` // approver name, or "system:on_timeout" / "system:accelerated"
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

// Vote is one approver's approval of a task that needs several (approval.<name>.min_approvals,
// docs/contract.md §3 two-person rule). Votes are kept on the task, in the store.
type Vote struct {
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// Deciders that are not people.
const (
	ByTimeout     = "system:on_timeout"
	ByAccelerated = "system:accelerated"
)

// RelatedTaskKey is the _meta key that marks a result or a message as belonging to a task
// (spec 2025-11-25 tasks, related-task metadata).
const RelatedTaskKey = "io.modelcontextprotocol/related-task"

// legacyPromotionHeader marked a promoted task in Headers before Task.Promoted.
const legacyPromotionHeader = "X-Tollgate-Promotion"

// Task is one Tollgate-owned task. Arguments and Headers are never logged.
type Task struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
	// Source is who created the task (package source), for the per-source pending quota.
	Source      string `json:"source,omitempty"`
	SessionID   string `json:"session_id"`
	RequestedBy string `json:"requested_by,omitzero"`
	// Requester is the verified caller that created the task (subject, e-mail, groups,
	// scopes), nil for a caller without one.
	Requester *identity.Caller `json:"requester,omitempty"`
	Tool      string           `json:"tool"`
	Arguments json.RawMessage  `json:"-"` // stored as bytes in taskData, kept exact
	ArgsHash  string           `json:"args_hash"`
	Headers   http.Header      `json:"headers,omitempty"`
	Workflow  string           `json:"workflow,omitempty"`
	// AskRequester: the approval is asked of the requester itself (workflow destination
	// elicitation); while awaiting it the wire status is input_required (docs/contract.md §2).
	AskRequester bool `json:"ask_requester,omitempty"`
	Accelerated  bool `json:"accelerated,omitempty"`
	// Promoted: the task took over a plain call already in flight upstream
	// (tasks.promote_after); its execution waits for that call's answer and never calls again.
	Promoted bool `json:"promoted,omitempty"`
	// IdemKey is set for plain calls a client may retry (CreateOrAttach): a hash of the
	// owner and ArgsHash. Never the owner itself.
	IdemKey          string        `json:"idem_key,omitempty"`
	State            State         `json:"state"`
	StatusMessage    string        `json:"status_message,omitempty"`
	CreatedAt        time.Time     `json:"created_at"`
	UpdatedAt        time.Time     `json:"updated_at"`
	TTL              time.Duration `json:"ttl"`
	PollInterval     time.Duration `json:"poll_interval"`
	ApprovalDeadline time.Time     `json:"approval_deadline,omitzero"`
	// Replica is the Tollgate instance that created the task. With a shared store only it
	// executes the task: the caller's upstream session lives in that instance's pod.
	Replica string `json:"replica,omitempty"`
	// RequiredApprovals is the workflow's min_approvals when the task was created (0 for tasks
	// stored before it existed: one). A decision needs max(this, the current min_approvals).
	RequiredApprovals int `json:"required_approvals,omitempty"`
	// Approvals are the distinct approvers' votes so far, oldest first; the last one of an
	// approved task is its Decision.
	Approvals []Vote          `json:"approvals,omitempty"`
	Decision  *Decision       `json:"decision,omitempty"`
	Result    json.RawMessage `json:"-"` // stored as bytes in taskData, kept exact
	Error     *jsonrpc.Error  `json:"error,omitempty"`
	Version   uint64          `json:"-"` // owned by the store
	// Era is EraModern for a task created by a 2026-07-28 request (no session: executed with
	// Meta as the request _meta), "" for the legacy era.
	Era  string          `json:"era,omitempty"`
	Meta json.RawMessage `json:"meta,omitempty"`
	// Question is the upstream's request to the owner during the call (questions.go), kept
	// until its answer is taken or its wait ends; Asked counts the task's questions.
	Question *Question `json:"question,omitempty"`
	Asked    int       `json:"asked,omitempty"`
	// LeaseHolder is the replica executing the task and LeaseUntil when its execution lease
	// ends unless that replica renews it (lease.go; shared store only, else both empty).
	LeaseHolder string    `json:"lease_holder,omitempty"`
	LeaseUntil  time.Time `json:"lease_until,omitzero"`
	// Messages are where approval channels posted about the task (messages.go), so whichever
	// replica sees the wait end updates them, after a restart too.
	Messages []MessageRef `json:"messages,omitempty"`
	// ToolDigest is the pinned digest of the tool's accepted definition when the task was
	// created (package pins; "" without pins): the re-check before execution fails the task
	// when the tool changed since.
	ToolDigest string `json:"tool_digest,omitempty"`
	// DeliveredAt is when Tollgate wrote the outcome of a terminal task with an IdemKey to its
	// owner (Manager.Delivered); from then on the same call is a new call, not a replay
	// (docs/contract.md §3). Zero until then, and for tasks no call can attach to.
	DeliveredAt time.Time `json:"delivered_at,omitzero"`
	// PreviousRejection is the rejection of the same call (same owner, tool and canonical
	// arguments) before this task was created, for its approvers; nil when there was none.
	PreviousRejection *PreviousRejection `json:"previous_rejection,omitempty"`
	// ProgressToken is the progressToken of the 2025-11-25 task-augmented request that created
	// the task (spec 2025-11-25 tasks: it stays valid for the task's lifetime): the upstream's
	// progress during the call reaches the caller under it. Nil for other tasks.
	ProgressToken json.RawMessage `json:"progress_token,omitempty"`
}

// PreviousRejection names the earlier task of the same call that was rejected (by a person or
// by its workflow's on_timeout), and who rejected it, why and when.
type PreviousRejection struct {
	TaskID string    `json:"task_id"`
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// ExpiresAt is when the task's TTL ends (spec: ttl counts from creation).
func (t *Task) ExpiresAt() time.Time { return t.CreatedAt.Add(t.TTL) }

// Clone returns a deep copy, so callers and subscribers can never change a stored task.
func (t *Task) Clone() *Task {
	c := *t
	c.Arguments = slices.Clone(t.Arguments)
	c.Result = slices.Clone(t.Result)
	c.Meta = slices.Clone(t.Meta)
	c.ProgressToken = slices.Clone(t.ProgressToken)
	c.Headers = t.Headers.Clone()
	c.Requester = t.Requester.Clone()
	c.Approvals = slices.Clone(t.Approvals)
	c.Messages = slices.Clone(t.Messages)
	c.Question = t.Question.clone()
	if t.PreviousRejection != nil {
		p := *t.PreviousRejection
		c.PreviousRejection = &p
	}
	if t.Decision != nil {
		d := *t.Decision
		c.Decision = &d
	}
	if t.Error != nil {
		e := *t.Error
		e.RawData = slices.Clone(t.Error.RawData)
		if t.Error.Data != nil {
			e.Data = make(map[string]any, len(t.Error.Data))
			for k, v := range t.Error.Data {
				e.Data[k] = v
			}
		}
		c.Error = &e
	}
	return &c
}

// wireTask is the spec 2025-11-25 Task object.
type wireTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           int64  `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

const wireTime = "2006-01-02T15:04:05.000Z07:00"

// WireJSON is the spec Task object (spec 2025-11-25 tasks, Data Types: Task): RFC 3339 UTC
// times, ttl and pollInterval in integer milliseconds.
func (t *Task) WireJSON() json.RawMessage {
	b, _ := jsonrpc.Marshal(wireTask{
		TaskID:        t.ID,
		Status:        t.WireStatus(),
		StatusMessage: t.StatusMessage,
		CreatedAt:     t.CreatedAt.UTC().Format(wireTime),
		LastUpdatedAt: t.UpdatedAt.UTC().Format(wireTime),
		TTL:           t.TTL.Milliseconds(),
		PollInterval:  t.PollInterval.Milliseconds(),
	})
	return b
}

// WireStatus is the spec status: input_required while an approval asked of the requester, or
// a question of the upstream's to the owner (PendingQuestion), is pending, else the state's
// status.
func (t *Task) WireStatus() string {
	if (t.AskRequester && t.State == AwaitingApproval) || t.PendingQuestion() != nil {
		return "input_required"
	}
	return t.State.Wire()
}

// CanonicalHash is the hex HMAC-SHA256 under key of the canonical JSON of
// {"arguments":…,"tool":…}: object keys sorted, insignificant whitespace dropped, numbers kept
// as written, no HTML escaping. An approval is bound to this hash (docs/contract.md §3) and it is
// checked again right before execution. The key makes it unforgeable for whoever can write
// the task store but not read Tollgate's key: swapping a stored task's arguments and
// recomputing a plain digest no longer goes unnoticed. Absent or null arguments hash like {}.
func CanonicalHash(key []byte, tool string, args json.RawMessage) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(canonicalCall(tool, args))
	return hex.EncodeToString(mac.Sum(nil))
}

// canonicalCall is the canonical JSON CanonicalHash authenticates.
func canonicalCall(tool string, args json.RawMessage) []byte {
	var v any = map[string]any{}
	if trimmed := bytes.TrimSpace(args); len(trimmed) > 0 && !bytes.Equal(trimmed, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			// not JSON: bind to the exact bytes instead
			v = string(args)
		}
	}
	b, err := jsonrpc.Marshal(map[string]any{"tool": tool, "arguments": v})
	if err != nil {
		b = append([]byte(tool+"\x00"), args...)
	}
	return b
}

// IdempotencyKey names a plain call for CreateOrAttach: the same owner calling the same tool
// with the same canonical arguments (argsHash from CanonicalHash) gets the same key.
func IdempotencyKey(owner, argsHash string) string {
	sum := sha256.Sum256([]byte(owner + "\x00" + argsHash))
	return hex.EncodeToString(sum[:])
}

// taskData is a Task as encoded into store.Record.Data. Raw JSON travels as []byte (base64)
// so the stored arguments and result come back byte for byte.
type taskData struct {
	Task
	Args []byte `json:"arguments,omitempty"`
	Res  []byte `json:"result,omitempty"`
}

func encodeTask(t *Task) (store.Record, error) {
	b, err := json.Marshal(taskData{Task: *t, Args: t.Arguments, Res: t.Result})
	if err != nil {
		return store.Record{}, err
	}
	return store.Record{
		ID: t.ID, Owner: t.Owner, Source: t.Source, State: string(t.State), Pending: !t.State.Terminal(),
		CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt(), ArgBytes: int64(len(t.Arguments)),
		Version: t.Version, Data: b, Key: t.IdemKey, Delivered: !t.DeliveredAt.IsZero(),
	}, nil
}

func decodeTask(r store.Record) (*Task, error) {
	var d taskData
	if err := json.Unmarshal(r.Data, &d); err != nil {
		return nil, err
	}
	t := d.Task
	t.Arguments, t.Result, t.Version = d.Args, d.Res, r.Version
	if t.Headers.Get(legacyPromotionHeader) != "" {
		// Stored before Task.Promoted existed: a marker header meant the same. Never re-send.
		t.Promoted = true
		t.Headers.Del(legacyPromotionHeader)
	}
	return &t, nil
}

// RequesterPerson is the requester as a person to compare with an approver: the name it
// requested under and, for a verified caller, its subject and e-mail.
func (t *Task) RequesterPerson() identity.Person {
	p := t.Requester.Person()
	if p.Name == "" {
		p.Name = t.RequestedBy
	} else if t.RequestedBy != "" && t.RequestedBy != p.Name {
		p.Subjects = append(p.Subjects, t.RequestedBy)
	}
	return p
}
