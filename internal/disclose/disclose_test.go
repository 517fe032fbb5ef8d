package disclose

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

func TestOwnerHash(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"alice", OwnerHash("alice")},
	}
	for _, tc := range tests {
		if got := OwnerHash(tc.in); got != tc.want {
			t.Errorf("OwnerHash(%q) = %q", tc.in, got)
		}
	}
	if h := OwnerHash("session:x"); len(h) != 12 || h == OwnerHash("session:y") {
		t.Errorf("OwnerHash not a 12-hex digest: %q", h)
	}
}

// TestArgumentsFailClosed: one rule for every place that shows arguments. A workflow removed
// by a reload hides them whole (the approvals API did; webhooks dropped the message; the
// requester's elicitation showed them unredacted).
func TestArgumentsFailClosed(t *testing.T) {
	wfs := map[string]config.Workflow{"ops": {RedactFields: []string{"password"}}, "open": {}}
	lookup := func(name string) (config.Workflow, bool) { wf, ok := wfs[name]; return wf, ok }
	tests := []struct {
		name, args, workflow string
		lookup               Workflows
		want                 string
	}{
		{"redacted per workflow", `{"user":"bob","password":"p"}`, "ops", lookup, `{"user":"bob","password":"[REDACTED]"}`},
		{"workflow without fields", `{"password":"p"}`, "open", lookup, `{"password":"p"}`},
		{"workflow removed by a reload", `{"user":"bob","password":"p"}`, "gone", lookup, `"[REDACTED]"`},
		{"no lookup", `{"user":"bob"}`, "ops", nil, `"[REDACTED]"`},
		{"no workflow (accelerated)", `{"password":"p"}`, "", nil, `{"password":"p"}`},
		{"absent arguments", ``, "ops", lookup, `{}`},
		{"not JSON", `{"password":"p"`, "open", lookup, `"[REDACTED]"`},
		{"not JSON, no workflow", `{"password":`, "", nil, `"[REDACTED]"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Arguments(json.RawMessage(tc.args), tc.workflow, tc.lookup)
			if string(got) != tc.want {
				t.Errorf("Arguments = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestOwnerHashIsKeyed: an unkeyed digest of "user:alice" shown in a webhook could be matched
// offline against guessed user names.
func TestOwnerHashIsKeyed(t *testing.T) {
	unkeyed := sha256.Sum256([]byte("user:alice"))
	if h := OwnerHash("user:alice"); h == hex.EncodeToString(unkeyed[:6]) {
		t.Fatalf("OwnerHash(user:alice) = %s, the unkeyed SHA-256", h)
	}
}

func TestSetOwnerKey(t *testing.T) {
	SetOwnerKey([]byte("key one"))
	one := OwnerHash("user:alice")
	SetOwnerKey([]byte("key two"))
	if two := OwnerHash("user:alice"); two == one || len(two) != 12 {
		t.Errorf("hash under two keys: %s, %s", one, two)
	}
	SetOwnerKey([]byte("key one"))
	if again := OwnerHash("user:alice"); again != one {
		t.Errorf("same key, different hash: %s, %s", one, again)
	}
}

// TestArgumentsNumbersExact: what leaves the process is the JSON the upstream receives, numbers
// as written — redacted or not — and Pretty only adds whitespace.
func TestArgumentsNumbersExact(t *testing.T) {
	const in = `{"account_id":9007199254740993,"ratio":1.0,"huge":1E400,"neg":-0.0,"big":123456789012345678901234567890,"pw":[1e-7]}`
	lookup := func(string) (config.Workflow, bool) { return config.Workflow{RedactFields: []string{"pw"}}, true }
	if got := Arguments(json.RawMessage(in), "", nil); string(got) != in {
		t.Errorf("unredacted: %s", got)
	}
	got := Arguments(json.RawMessage(in), "w", lookup)
	const want = `{"account_id":9007199254740993,"ratio":1.0,"huge":1E400,"neg":-0.0,"big":123456789012345678901234567890,"pw":"[REDACTED]"}`
	if string(got) != want {
		t.Errorf("redacted: %s\nwant      %s", got, want)
	}
	p := Pretty(got)
	if strings.Join(strings.Fields(p), "") != want || !strings.Contains(p, `"account_id": 9007199254740993,`) {
		t.Errorf("Pretty changed more than whitespace:\n%s", p)
	}
	if Pretty(json.RawMessage(`{"a":`)) != `{"a":` {
		t.Error("Pretty of invalid JSON is not the input")
	}
}
