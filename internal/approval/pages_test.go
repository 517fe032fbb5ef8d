package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tollgate-mcp/tollgate/internal/disclose"
)

// getAPI serves one GET of the approvals API as alice and returns the status and body.
func getAPI(t *testing.T, h http.Handler, path string) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

// bigArgs is a JSON object of about n bytes whose text mixes multi-byte characters, so a
// preview cut at a byte count would split one if it were not cut at a character boundary.
func bigArgs(i, n int) []byte {
	return []byte(fmt.Sprintf(`{"n":%d,"blob":"%s"}`, i, strings.Repeat("é€x", n/6)))
}

// followPages reads every page of path (with ?cursor=) and returns the rows in order and the
// largest body seen.
func followPages(t *testing.T, h http.Handler, path string) ([]View, int) {
	t.Helper()
	var rows []View
	largest := 0
	cur := ""
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatal("cursor never ended")
		}
		p := path
		if cur != "" {
			p += "&cursor=" + url.QueryEscape(cur)
		}
		code, body := getAPI(t, h, p)
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d %s", p, code, body)
		}
		largest = max(largest, len(body))
		var lr ListResponse
		if err := json.Unmarshal(body, &lr); err != nil {
			t.Fatal(err)
		}
		if lr.NextCursor != "" && len(lr.Approvals) == 0 {
			t.Fatal("an empty page with a cursor")
		}
		rows = append(rows, lr.Approvals...)
		if lr.NextCursor == "" {
			return rows, largest
		}
		cur = lr.NextCursor
	}
}

// TestListPageBoundedInBytes: one page of 100 pending requests of 1 MiB arguments each was
// ~208 MB (every row carried its arguments twice, as JSON and as indented text). Now a row
// with large arguments carries a summary, the page stays within MaxListPageBytes, the detail
// view carries the arguments whole, and the cursor reaches every request.
func TestListPageBoundedInBytes(t *testing.T) {
	const n, argBytes = 100, 1 << 20
	f := newFake()
	for i := range n {
		tk := pendingTask(fmt.Sprintf("tg_big%03d", i), time.Duration(n-i)*time.Second)
		tk.Arguments = bigArgs(i, argBytes)
		f.tasks[tk.ID] = tk
	}
	redacted := func(id string) []byte {
		tk := f.tasks[id]
		return disclose.Arguments(tk.Arguments, tk.Workflow, testWorkflows)
	}
	h := NewHandler(f, testAuth(), Options{Workflow: testWorkflows})

	// The default page (100) and the pages after it, if any: every request once, each page
	// within the bound (the page's rows within MaxListPageBytes, plus the envelope).
	rows, largest := followPages(t, h, "/api/v1/approvals?sort=newest")
	if largest > MaxListPageBytes+1024 {
		t.Fatalf("one page of %d requests of %d bytes is %d bytes; want at most %d", n, argBytes, largest, MaxListPageBytes+1024)
	}
	seen := map[string]bool{}
	for i, v := range rows {
		if seen[v.TaskID] {
			t.Fatalf("%s listed twice", v.TaskID)
		}
		seen[v.TaskID] = true
		if !v.ArgumentsTruncated || v.Arguments != nil || v.ArgumentsText != "" {
			t.Fatalf("%s: row not summarised (truncated=%v, %d bytes of arguments)", v.TaskID, v.ArgumentsTruncated, len(v.Arguments)+len(v.ArgumentsText))
		}
		if i%25 != 0 {
			continue // redacting 1 MiB is slow under -race; a sample suffices
		}
		want := redacted(v.TaskID)
		sum := sha256.Sum256(want)
		switch {
		case v.ArgumentsBytes != len(want):
			t.Errorf("%s: argumentsBytes = %d, want %d", v.TaskID, v.ArgumentsBytes, len(want))
		case v.ArgumentsSha256 != hex.EncodeToString(sum[:]):
			t.Errorf("%s: argumentsSha256 = %q", v.TaskID, v.ArgumentsSha256)
		case len(v.ArgumentsPreview) == 0 || len(v.ArgumentsPreview) > ArgumentsPreviewBytes:
			t.Errorf("%s: preview of %d bytes", v.TaskID, len(v.ArgumentsPreview))
		case !utf8.ValidString(v.ArgumentsPreview) || !strings.HasPrefix(string(want), v.ArgumentsPreview):
			t.Errorf("%s: preview %q is not a whole-character prefix of the redacted arguments", v.TaskID, v.ArgumentsPreview)
		}
	}
	if len(seen) != n {
		t.Fatalf("the pages reached %d of %d requests", len(seen), n)
	}

	// The detail view carries the arguments whole.
	id := rows[0].TaskID
	code, body := getAPI(t, h, "/api/v1/approvals/"+id)
	if code != http.StatusOK {
		t.Fatalf("show = %d", code)
	}
	var v View
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	want := redacted(id)
	if v.ArgumentsTruncated || string(v.Arguments) != string(want) || v.ArgumentsText != disclose.Pretty(want) {
		t.Fatalf("detail of %s: truncated=%v, %d bytes of arguments, want %d", id, v.ArgumentsTruncated, len(v.Arguments), len(want))
	}
}

// TestListPageStopsAtByteBound: rows just under the summary threshold are listed whole, and
// a page of 1000 of them would exceed MaxListPageBytes, so the page ends early with a cursor
// that continues after its last row.
func TestListPageStopsAtByteBound(t *testing.T) {
	const n = 600
	f := newFake()
	for i := range n {
		tk := pendingTask(fmt.Sprintf("tg_mid%04d", i), time.Duration(n-i)*time.Second)
		tk.Arguments = []byte(fmt.Sprintf(`{"n":%d,"s":"%s"}`, i, strings.Repeat("<", MaxListArgumentsBytes-40)))
		f.tasks[tk.ID] = tk
	}
	h := NewHandler(f, testAuth(), Options{Workflow: testWorkflows})
	code, body := getAPI(t, h, fmt.Sprintf("/api/v1/approvals?limit=%d", MaxListLimit))
	if code != http.StatusOK {
		t.Fatalf("list = %d", code)
	}
	var lr ListResponse
	if err := json.Unmarshal(body, &lr); err != nil {
		t.Fatal(err)
	}
	if len(body) > MaxListPageBytes+1024 || lr.NextCursor == "" || len(lr.Approvals) >= n {
		t.Fatalf("page of %d rows, %d bytes, cursor %q: want it cut at %d bytes with a cursor", len(lr.Approvals), len(body), lr.NextCursor, MaxListPageBytes)
	}
	if v := lr.Approvals[0]; v.ArgumentsTruncated || len(v.Arguments) == 0 {
		t.Fatalf("a row under the threshold was summarised")
	}
	rows, largest := followPages(t, h, fmt.Sprintf("/api/v1/approvals?limit=%d", MaxListLimit))
	for i, r := range rows {
		if want := fmt.Sprintf("tg_mid%04d", i); r.TaskID != want {
			t.Fatalf("row %d is %s, want %s (oldest first, none repeated or skipped)", i, r.TaskID, want)
		}
	}
	if len(rows) != n || largest > MaxListPageBytes+1024 {
		t.Fatalf("the cursor reached %d of %d; largest page %d bytes", len(rows), n, largest)
	}
}
