package approval

import (
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// TestLargeRowAllocatesLittle: a list row whose 1 MiB arguments are summarised is redacted as a
// stream into its summary, so serving it allocates a small part of its size. Fails on the
// redaction that built the redacted copy through a json.Decoder (about 7 MB for this row).
func TestLargeRowAllocatesLittle(t *testing.T) {
	const size = 1 << 20
	tk := pendingTask("big", 0)
	tk.Arguments = json.RawMessage(`{"user":"bob","password":"p","credentials":{"api_key":"k"},"blob":"` + strings.Repeat("a", size) + `"}`)
	h := NewHandler(newFake(tk), testAuth(), Options{Workflow: testWorkflows})
	code, body := getAPI(t, h, "/api/v1/approvals") // warm up
	if code != http.StatusOK || !strings.Contains(string(body), `"argumentsTruncated":true`) {
		t.Fatalf("%d %.300s", code, body)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	code, _ = getAPI(t, h, "/api/v1/approvals")
	runtime.ReadMemStats(&after)
	if code != http.StatusOK {
		t.Fatal(code)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > size/4 {
		t.Errorf("serving one summarised 1 MiB row allocated %d bytes, want at most %d", got, size/4)
	} else {
		t.Logf("allocated %d bytes", got)
	}
}
