// Package disclose decides what of a task may be shown outside Tollgate — to approvers (API,
// console, webhook and Slack messages), to a requester asked to approve its own call, and in
// the audit log: tool arguments with the workflow's redact_fields hidden, and owners only as a
// short hash. Every place that shows a task goes through it, so they cannot disagree.
package disclose

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"sync/atomic"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// ownerKey keys OwnerHash; random per process until SetOwnerKey gives the server's key.
var ownerKey atomic.Pointer[[]byte]

func init() {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails (Go 1.24)
	ownerKey.Store(&k)
}

// SetOwnerKey sets the key of OwnerHash for the process (the server's owner key, kept with the
// task store, so hashes in the audit log agree across restarts and replicas). An empty key is
// ignored.
func SetOwnerKey(key []byte) {
	if len(key) > 0 {
		k := bytes.Clone(key)
		ownerKey.Store(&k)
	}
}

// OwnerHash is the short, non-reversible form in which owners are shown and logged: owner ids
// may be MCP session ids, which act as capabilities and must not be disclosed. It is keyed:
// an unkeyed digest of "user:alice" could be matched offline against guessed user names.
func OwnerHash(owner string) string {
	if owner == "" {
		return ""
	}
	mac := hmac.New(sha256.New, *ownerKey.Load())
	mac.Write([]byte("owner\x00" + owner))
	return hex.EncodeToString(mac.Sum(nil)[:6])
}

// Workflows looks up an approval workflow in the current configuration; ok is false when it
// does not exist (a reload removed it).
type Workflows func(name string) (wf config.Workflow, ok bool)

// Pretty is args (a result of Arguments) indented for people, as text: numbers stay as written
// (9007199254740993, 1.0, 1E400) because nothing is decoded, so an approver reads exactly what
// the upstream will receive; a browser that parsed the JSON would show such numbers rounded
// through float64. Not JSON: returned as it is.
func Pretty(args json.RawMessage) string {
	var b bytes.Buffer
	if json.Indent(&b, args, "", "  ") != nil {
		return string(args)
	}
	return b.String()
}

// Arguments is the one view of a task's arguments that may leave the process. It fails
// closed: arguments that are not JSON, or whose workflow cannot be found (removed by a
// reload, or no lookup given), are replaced whole by "[REDACTED]". A task without a workflow
// ("", an accelerated forward that nobody approves) hides nothing; absent arguments are {}.
func Arguments(args json.RawMessage, workflow string, lookup Workflows) json.RawMessage {
	root, whole := argumentsPlan(args, workflow, lookup)
	switch {
	case whole != nil:
		return whole
	case root == nil:
		return args
	}
	return redactBytes(args, root)
}

// WriteArguments writes to w the bytes Arguments returns, in one pass over args and without
// building them: a caller that only needs their size, hash and first bytes (the approvals list
// summarising a large row) holds none of them. Only w's errors are returned.
func WriteArguments(w io.Writer, args json.RawMessage, workflow string, lookup Workflows) error {
	root, whole := argumentsPlan(args, workflow, lookup)
	switch {
	case whole != nil:
		_, err := w.Write(whole)
		return err
	case root == nil:
		_, err := w.Write(args)
		return err
	}
	return redactTo(w, args, root)
}

// argumentsPlan decides what Arguments shows: whole, when it replaces args whole ({} or
// "[REDACTED]"); else the fields to redact (nil: args as they are).
func argumentsPlan(args json.RawMessage, workflow string, lookup Workflows) (root *redactNode, whole json.RawMessage) {
	if len(args) == 0 {
		return nil, json.RawMessage("{}")
	}
	if !json.Valid(args) {
		return nil, redactedJSON // cannot be redacted by path, and would break the JSON around it
	}
	if workflow == "" {
		return nil, nil
	}
	if lookup == nil {
		return nil, redactedJSON
	}
	wf, ok := lookup(workflow)
	if !ok {
		return nil, redactedJSON
	}
	if root = buildRedactTree(wf.RedactFields); len(root.children) == 0 {
		return nil, nil
	}
	return root, nil
}
