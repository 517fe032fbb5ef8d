package intercept

import "sync"

// waiters counts, per task, the plain calls waiting for its outcome on this process right now
// (a held or blocked call in outcomeOrQuestion): approvers are told when nobody waits any more
// (docs/contract.md §4 requesterNotWaiting). Bounded by the open connections that wait.
type waiters struct {
	mu sync.Mutex
	n  map[string]int
}

// enter records a call waiting for task id; the returned func ends that wait and reports
// whether it was the last one.
func (w *waiters) enter(id string) (leave func() (last bool)) {
	w.mu.Lock()
	if w.n == nil {
		w.n = map[string]int{}
	}
	w.n[id]++
	w.mu.Unlock()
	var once sync.Once
	return func() (last bool) {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.n[id]--; w.n[id] <= 0 {
				delete(w.n, id)
				last = true
			}
		})
		return last
	}
}

func (w *waiters) waiting(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[id] > 0
}

// RequesterWaiting reports whether a call of task id's requester waits for its outcome on
// this process now (a held or blocked tools/call still open).
func (g *Gateway) RequesterWaiting(id string) bool { return g.waiting.waiting(id) }
