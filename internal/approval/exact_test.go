package approval

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// exactArgs are numbers a float64 round trip changes: 2^53+1, a fraction written with a zero,
// one beyond float64, and 30 digits.
const exactArgs = `{"account_id":9007199254740993,"ratio":1.0,"huge":1E400,"big":123456789012345678901234567890,"password":"pw"}`

// TestViewArgumentsExact: approvers see the arguments exactly as the upstream will receive
// them. The view carries them as text too (argumentsText), because the console's JSON.parse
// rounded 9007199254740993 to …992, 1.0 to 1 and 1E400 to 1.797…e+308.
func TestViewArgumentsExact(t *testing.T) {
	tk := pendingTask("tg_n", 0)
	tk.Arguments = json.RawMessage(exactArgs)
	h := NewHandler(newFake(tk), testAuth(), Options{Workflow: testWorkflows})
	req := httptest.NewRequest("GET", "/api/v1/approvals/tg_n", nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var v View
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil || rec.Code != 200 {
		t.Fatalf("status %d body %s", rec.Code, rec.Body)
	}
	const want = `{"account_id":9007199254740993,"ratio":1.0,"huge":1E400,"big":123456789012345678901234567890,"password":"[REDACTED]"}`
	if string(v.Arguments) != want {
		t.Errorf("arguments = %s\nwant        %s", v.Arguments, want)
	}
	for _, s := range []string{`"account_id": 9007199254740993`, `"ratio": 1.0`, `"huge": 1E400`, `"big": 123456789012345678901234567890`, `"password": "[REDACTED]"`} {
		if !strings.Contains(v.ArgumentsText, s) {
			t.Errorf("argumentsText lacks %s:\n%s", s, v.ArgumentsText)
		}
	}
	if strings.Contains(v.ArgumentsText, `"pw"`) {
		t.Error("argumentsText shows a redacted value")
	}
}
