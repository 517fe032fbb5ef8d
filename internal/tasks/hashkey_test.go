package tasks

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
)

// TestSwappedArgumentsDetected: someone who can write the task store (a shared Redis) swaps
// the arguments of a task awaiting approval and recomputes the hash with the public
// algorithm. The approval is bound to a keyed hash (HMAC-SHA256) the writer cannot forge, so
// the re-check at execution fails the task with -32011 ArgumentsChanged and the swapped call
// never runs. With a plain SHA-256 the swap went unnoticed and executed.
func TestSwappedArgumentsDetected(t *testing.T) {
	plain := func(tool string, args json.RawMessage) string {
		sum := sha256.Sum256(canonicalCall(tool, args))
		return hex.EncodeToString(sum[:])
	}
	emptyKey := func(tool string, args json.RawMessage) string { return CanonicalHash(nil, tool, args) }
	for name, guess := range map[string]func(string, json.RawMessage) string{"plain sha256": plain, "empty key": emptyKey} {
		t.Run(name, func(t *testing.T) { swapArguments(t, guess) })
	}
}

func swapArguments(t *testing.T, guess func(string, json.RawMessage) string) {
	e := newEnv(t, nil)
	tk := e.create(t, "alice", func(r *CreateRequest) { r.Arguments = json.RawMessage(`{"path":"/tmp/x"}`) })

	rec, err := e.st.Get(bg, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := decodeTask(rec)
	if err != nil {
		t.Fatal(err)
	}
	// The writer knows the algorithm but not the key: a plain digest (what the hash used to
	// be) or an HMAC under a guessed key.
	stored.Arguments = json.RawMessage(`{"path":"/"}`)
	stored.ArgsHash = guess(stored.Tool, stored.Arguments)
	swapped, err := encodeTask(stored)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Update(bg, swapped, rec.Version); err != nil {
		t.Fatal(err)
	}

	if _, err := e.m.Approve(bg, tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	_, rpcErr := e.result(t, "alice", tk.ID)
	if rpcErr == nil || rpcErr.Code != -32011 || rpcErr.Name() != "ArgumentsChanged" {
		t.Errorf("result error %v, want -32011 ArgumentsChanged", rpcErr)
	}
	if s := e.state(t, tk.ID); s != Failed {
		t.Errorf("state %s, want failed", s)
	}
	if n := e.exec.calls.Load(); n != 0 {
		t.Errorf("the swapped call executed %d times", n)
	}
}
