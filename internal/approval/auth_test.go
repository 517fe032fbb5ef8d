package approval

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// throttled is the approvals API over newFake behind Throttle, counting refusals.
func throttled(t *testing.T) (http.Handler, *int) {
	t.Helper()
	refused := 0
	var mu sync.Mutex
	auth := StaticTokens(map[string]string{aliceToken: "alice"})
	api := NewHandler(newFake(), auth, Options{})
	return Throttle(api, ThrottleOptions{Auth: auth, OnRefuse: func() { mu.Lock(); refused++; mu.Unlock() }}), &refused
}

// call sends GET /api/v1/approvals from remote with token ("" = no Authorization header).
func call(h http.Handler, remote, token string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/api/v1/approvals", nil)
	r.RemoteAddr = remote
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestThrottleFailedTokens: an address that keeps guessing gets AuthFailureBurst 401s, then
// 429 with Retry-After and a JSON error — for a correct token too, else the 429 would mark
// the right guess. Other addresses are not affected, and one failure is regained per
// AuthFailureEvery. Before the throttle, 1500 guesses took 258 ms.
func TestThrottleFailedTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, refused := throttled(t)
		const attacker, other = "192.0.2.7:4000", "198.51.100.9:5000"
		for i := range AuthFailureBurst {
			if w := call(h, attacker, "wrong-guess-"+strconv.Itoa(i)); w.Code != http.StatusUnauthorized {
				t.Fatalf("guess %d: HTTP %d, want 401", i, w.Code)
			}
		}
		w := call(h, attacker, "wrong-guess-x")
		if w.Code != http.StatusTooManyRequests {
			t.Fatalf("guess %d: HTTP %d, want 429", AuthFailureBurst, w.Code)
		}
		if ra := w.Header().Get("Retry-After"); ra != "1" {
			t.Errorf("Retry-After %q, want 1", ra)
		}
		var e ErrorResponse
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error != "too_many_failures" || e.Message == "" {
			t.Errorf("429 body %q (%v), want error too_many_failures with a message", w.Body, err)
		}
		if w := call(h, attacker, aliceToken); w.Code != http.StatusTooManyRequests {
			t.Errorf("correct token from the throttled address: HTTP %d, want 429 (no oracle)", w.Code)
		}
		if w := call(h, "192.0.2.7:4001", "wrong"); w.Code != http.StatusTooManyRequests {
			t.Errorf("another port of the throttled address: HTTP %d, want 429", w.Code)
		}
		if w := call(h, attacker, ""); w.Code != http.StatusUnauthorized {
			t.Errorf("no credentials from the throttled address: HTTP %d, want 401", w.Code)
		}
		if w := call(h, other, aliceToken); w.Code != http.StatusOK {
			t.Errorf("correct token from another address: HTTP %d, want 200", w.Code)
		}
		if w := call(h, other, "wrong"); w.Code != http.StatusUnauthorized {
			t.Errorf("a first wrong token from another address: HTTP %d, want 401", w.Code)
		}
		if *refused != 3 {
			t.Errorf("%d refusals counted, want 3", *refused)
		}

		time.Sleep(AuthFailureEvery) // one failure regained
		if w := call(h, attacker, "wrong-again"); w.Code != http.StatusUnauthorized {
			t.Errorf("after %v: HTTP %d, want 401", AuthFailureEvery, w.Code)
		}
		if w := call(h, attacker, "wrong-again"); w.Code != http.StatusTooManyRequests {
			t.Errorf("second guess after %v: HTTP %d, want 429", AuthFailureEvery, w.Code)
		}
		time.Sleep(AuthFailureBurst * AuthFailureEvery)
		if w := call(h, attacker, aliceToken); w.Code != http.StatusOK {
			t.Errorf("correct token once the bucket refilled: HTTP %d, want 200", w.Code)
		}
	})
}

// TestThrottleSuccessesDoNotCount: requests that authenticate give their slot back, so an
// approver polling the API is never throttled, and its later typos still get 401.
func TestThrottleSuccessesDoNotCount(t *testing.T) {
	h, _ := throttled(t)
	const approver = "[2001:db8:1:2::5]:6000"
	for i := range 10 * AuthFailureBurst {
		if w := call(h, approver, aliceToken); w.Code != http.StatusOK {
			t.Fatalf("request %d: HTTP %d, want 200", i, w.Code)
		}
	}
	for i := range AuthFailureBurst {
		if w := call(h, approver, "typo"); w.Code != http.StatusUnauthorized {
			t.Fatalf("typo %d: HTTP %d, want 401", i, w.Code)
		}
	}
	// The same /64 is the same source.
	if w := call(h, "[2001:db8:1:2::99]:6001", "typo"); w.Code != http.StatusTooManyRequests {
		t.Errorf("another address of the /64: HTTP %d, want 429", w.Code)
	}
}

// TestThrottleParallelGuesses: guesses sent at once cannot all pass before any is counted.
func TestThrottleParallelGuesses(t *testing.T) {
	h, _ := throttled(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := call(h, "192.0.2.8:1", "guess-"+strconv.Itoa(i))
			mu.Lock()
			codes[w.Code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	// A token may be regained while the guesses run; not more than a few.
	if n := codes[http.StatusUnauthorized]; n < AuthFailureBurst || n > AuthFailureBurst+2 || codes[http.StatusUnauthorized]+codes[http.StatusTooManyRequests] != 200 {
		t.Errorf("answers %v, want %d (or a little more) × 401 and the rest 429", codes, AuthFailureBurst)
	}
}

// TestThrottleParallelApprovers: many requests with a correct token from one address at once
// (an approvals script, several approvers behind one NAT, a test) are all served. Each used to
// reserve a failure token for as long as it ran, so the 21st at once was answered 429.
func TestThrottleParallelApprovers(t *testing.T) {
	const n = 3 * AuthFailureBurst
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	slow := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		arrived.Done()
		select { // hold every request until all n are in (or give up, and fail below)
		case <-all:
		case <-time.After(5 * time.Second):
		}
		w.WriteHeader(http.StatusOK)
	})
	h := Throttle(slow, ThrottleOptions{Auth: StaticTokens(map[string]string{aliceToken: "alice"})})
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range n {
		wg.Go(func() {
			w := call(h, "192.0.2.9:1", aliceToken)
			mu.Lock()
			codes[w.Code]++
			mu.Unlock()
			if w.Code != http.StatusOK {
				arrived.Done() // it never reached the handler
			}
		})
	}
	wg.Wait()
	if codes[http.StatusOK] != n {
		t.Errorf("answers %v to %d parallel requests with a correct token, want all 200", codes, n)
	}
}

// TestThrottleBoundedSources: the table of sources is an LRU of at most AuthSources.
func TestThrottleBoundedSources(t *testing.T) {
	h, _ := throttled(t)
	for i := range AuthSources + 500 {
		call(h, "10."+strconv.Itoa(i>>16&255)+"."+strconv.Itoa(i>>8&255)+"."+strconv.Itoa(i&255)+":1", "wrong")
	}
	if n := h.(*throttle).sources(); n != AuthSources {
		t.Errorf("%d sources remembered, want %d", n, AuthSources)
	}
}
