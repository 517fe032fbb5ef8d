package tasks

import (
	"encoding/json"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// EraModern marks tasks created by protocol 2026-07-28 requests.
const EraModern = "modern"

// modernTask is the tasks extension's Task / DetailedTask (tasks-extension-schema.ts): flat,
// ttlMs and pollIntervalMs, the outcome inlined.
type modernTask struct {
	ResultType     string          `json:"resultType,omitempty"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          int64           `json:"ttlMs"`
	PollIntervalMs int64           `json:"pollIntervalMs"`
	InputRequests  json.RawMessage `json:"inputRequests,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *jsonrpc.Error  `json:"error,omitempty"`
}

// ModernStatus is the task's status in the tasks extension. It differs from the legacy one in
// one place: `failed` is only for JSON-RPC errors, so a tool result with isError (stored as
// Failed with a Result) is `completed` (tasks extension "Task Execution Errors": MUST NOT use
// failed for non-JSON-RPC errors).
func (t *Task) ModernStatus() string {
	if t.State == Failed && t.Result != nil && t.Error == nil {
		return "completed"
	}
	return t.WireStatus()
}

// CreateTaskResult is the flat CreateTaskResult (tasks extension "Task Creation": resultType
// "task", the seed state, no inputRequests and no outcome).
func (t *Task) CreateTaskResult() json.RawMessage {
	return t.modern("task", false, nil)
}

// DetailedJSON is the GetTaskResult / notifications/tasks payload: resultType "complete" and
// the status-specific fields (tasks extension "Task Polling" 1–5): inputRequests while
// input_required, result when completed, error when failed.
func (t *Task) DetailedJSON(inputRequests json.RawMessage) json.RawMessage {
	return t.modern("complete", true, inputRequests)
}

// StatusNotification is the params of notifications/tasks: the DetailedTask without
// resultType (tasks extension "Task Status Notifications").
func (t *Task) StatusNotification(inputRequests json.RawMessage) json.RawMessage {
	return t.modern("", true, inputRequests)
}

func (t *Task) modern(resultType string, detailed bool, inputRequests json.RawMessage) json.RawMessage {
	w := modernTask{
		ResultType: resultType, TaskID: t.ID, Status: t.ModernStatus(), StatusMessage: t.StatusMessage,
		CreatedAt: t.CreatedAt.UTC().Format(wireTime), LastUpdatedAt: t.UpdatedAt.UTC().Format(wireTime),
		TTLMs: t.TTL.Milliseconds(), PollIntervalMs: t.PollInterval.Milliseconds(),
	}
	if detailed {
		switch w.Status {
		case "input_required":
			w.InputRequests = inputRequests
		case "completed":
			w.Result = t.Result
		case "failed":
			w.Error = t.Error
			if w.Error == nil {
				_, w.Error = outcome(t)
			}
		}
	}
	b, _ := jsonrpc.Marshal(w)
	return b
}
