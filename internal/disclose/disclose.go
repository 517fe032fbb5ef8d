// Package disclose decides what of a task may be shown outside Tollgate — to approvers (API,
// console, webhook and Slack messages), to a requester asked to approve its own call, and in
// the audit log: tool arguments with the workflow's redact_fields hidden, and owners only as a
// short hash. Every place that shows a task goes through it, so they cannot disagree.
package disclose

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// OwnerHash is the short, non-reversible form in which owners are shown and logged: owner ids
// may be MCP session ids, which act as capabilities and must not be disclosed.
func OwnerHash(owner string) string {
	if owner == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:6])
}

// Workflows looks up an approval workflow in the current configuration; ok is false when it
// does not exist (a reload removed it).
type Workflows func(name string) (wf config.Workflow, ok bool)

// Arguments is the one view of a task's arguments that may leave the process. It fails
// closed: arguments that are not JSON, or whose workflow cannot be found (removed by a
// reload, or no lookup given), are replaced whole by "[REDACTED]". A task without a workflow
// ("", an accelerated forward that nobody approves) hides nothing; absent arguments are {}.
func Arguments(args json.RawMessage, workflow string, lookup Workflows) json.RawMessage {
	if len(args) == 0 {
		return json.RawMessage("{}")
	}
	if !json.Valid(args) {
		return redactedJSON // cannot be redacted by path, and would break the JSON around it
	}
	if workflow == "" {
		return args
	}
	if lookup == nil {
		return redactedJSON
	}
	wf, ok := lookup(workflow)
	if !ok {
		return redactedJSON
	}
	return Redact(args, wf.RedactFields)
}
