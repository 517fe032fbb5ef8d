package console

import (
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// The assets are served byte for byte from the binary, and building the handler does not copy
// them onto the heap (≈ 38 KB per Handler before).
func TestAssetsServedWithoutHeapCopy(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h := Handler()
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 8<<10 {
		t.Errorf("Handler allocated %d bytes, want at most 8 KiB (no copy of the assets)", got)
	}
	for path, file := range map[string]string{Path: "static/index.html", Path + "/": "static/index.html",
		Path + "/console.js": "static/console.js", Path + "/console.css": "static/console.css", Path + "/favicon.svg": "static/favicon.svg"} {
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || rec.Body.String() != string(want) || rec.Header().Get("Content-Length") != itoa(len(want)) {
			t.Errorf("GET %s: %d, %d bytes (Content-Length %s), want 200 and the %d bytes of %s",
				path, rec.Code, rec.Body.Len(), rec.Header().Get("Content-Length"), len(want), file)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
