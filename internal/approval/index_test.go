package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// countingStore counts the records a store hands out (each is decoded by the task manager).
type countingStore struct {
	store.Store
	read atomic.Int64
}

func (c *countingStore) List(ctx context.Context, f store.Filter) ([]store.Record, error) {
	rs, err := c.Store.List(ctx, f)
	c.read.Add(int64(len(rs)))
	return rs, err
}

func (c *countingStore) Page(ctx context.Context, q store.PageQuery) (store.PageResult, error) {
	res, err := c.Store.Page(ctx, q)
	c.read.Add(int64(len(res.Records)))
	return res, err
}

func (c *countingStore) Get(ctx context.Context, id string) (store.Record, error) {
	r, err := c.Store.Get(ctx, id)
	if err == nil {
		c.read.Add(1)
	}
	return r, err
}

// pendingManager is a real task manager on a counting memory store holding n pending calls,
// the i-th of tool(i), created one millisecond apart.
func pendingManager(t *testing.T, n int, tool func(i int) string) (*tasks.Manager, *countingStore, []string) {
	t.Helper()
	cs := &countingStore{Store: store.NewMemory()}
	now := t0
	wf := func(string) (config.Workflow, bool) {
		return config.Workflow{Timeout: config.Duration(time.Hour)}, true
	}
	m := tasks.NewManager(cs, okExec{}, nil, tasks.Options{Workflow: wf, Now: func() time.Time { return now },
		Quotas: config.Quotas{MaxPendingPerOwner: n + 10, MaxPendingTotal: n + 10}})
	t.Cleanup(func() { _ = m.Close() })
	ids := make([]string, n)
	for i := range n {
		now = t0.Add(time.Duration(i) * time.Millisecond)
		tk, err := m.Create(context.Background(), tasks.CreateRequest{Owner: "session:o", RequestedBy: "carol", Tool: tool(i),
			Arguments: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Workflow: "default"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = tk.ID
	}
	now = t0.Add(time.Minute)
	return m, cs, ids
}

func getPage(t *testing.T, h http.Handler, path string) ListResponse {
	t.Helper()
	code, body := getAPI(t, h, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d %s", path, code, body)
	}
	var lr ListResponse
	if err := json.Unmarshal(body, &lr); err != nil {
		t.Fatal(err)
	}
	return lr
}

// TestListPageReadsItsRowsOnly: a page of pending approvals reads (and decodes) the rows it
// shows and a few more, not every pending task. Fails on the list that read them all
// (ListAll), which read 3000 records for a page of 10.
func TestListPageReadsItsRowsOnly(t *testing.T) {
	const n, limit = 3000, 10
	m, cs, ids := pendingManager(t, n, func(int) string { return "delete_user" })
	h := NewHandler(m, testAuth(), Options{Workflow: testWorkflows})
	for _, tc := range []struct {
		sort  string
		first string
	}{{SortOldest, ids[0]}, {SortNewest, ids[n-1]}} {
		cs.read.Store(0)
		lr := getPage(t, h, "/api/v1/approvals?limit=10&sort="+tc.sort)
		if len(lr.Approvals) != limit || lr.Approvals[0].TaskID != tc.first || lr.NextCursor == "" {
			t.Fatalf("sort=%s: %d rows, first %s, cursor %q", tc.sort, len(lr.Approvals), lr.Approvals[0].TaskID, lr.NextCursor)
		}
		if got := cs.read.Load(); got > limit+listBatch {
			t.Errorf("sort=%s: a page of %d read %d records of %d pending, want at most %d", tc.sort, limit, got, n, limit+listBatch)
		}
		// the second page: also O(page), and it goes on where the first ended
		cs.read.Store(0)
		lr2 := getPage(t, h, "/api/v1/approvals?limit=10&sort="+tc.sort+"&cursor="+url.QueryEscape(lr.NextCursor))
		want := ids[limit]
		if tc.sort == SortNewest {
			want = ids[n-1-limit]
		}
		if len(lr2.Approvals) != limit || lr2.Approvals[0].TaskID != want {
			t.Errorf("sort=%s: second page starts at %v, want %s", tc.sort, lr2.Approvals, want)
		}
		if got := cs.read.Load(); got > limit+listBatch {
			t.Errorf("sort=%s: the second page read %d records", tc.sort, got)
		}
	}
}

// TestListScanIsBounded: a filter that skips every row still ends a page after MaxListScan
// entries, with a cursor that goes on from there, and the row beyond is found on a later page.
func TestListScanIsBounded(t *testing.T) {
	n := MaxListScan + 100
	m, cs, ids := pendingManager(t, n, func(i int) string {
		if i == n-1 {
			return "rare"
		}
		return "common"
	})
	h := NewHandler(m, testAuth(), Options{Workflow: testWorkflows})
	lr := getPage(t, h, "/api/v1/approvals?tool=rare")
	if len(lr.Approvals) != 0 || lr.NextCursor == "" || !lr.Truncated {
		t.Fatalf("first page: %d rows, cursor %q; want none and a cursor (scan bound)", len(lr.Approvals), lr.NextCursor)
	}
	if got := cs.read.Load(); got > MaxListScan {
		t.Errorf("one page read %d records, want at most MaxListScan=%d", got, MaxListScan)
	}
	lr = getPage(t, h, "/api/v1/approvals?tool=rare&cursor="+url.QueryEscape(lr.NextCursor))
	if len(lr.Approvals) != 1 || lr.Approvals[0].TaskID != ids[n-1] || lr.NextCursor != "" {
		t.Errorf("second page: %+v", lr)
	}
}

// TestListCursorStable: pages followed while calls are created and decided between them show
// every call that stays pending exactly once, in order, whichever sort.
func TestListCursorStable(t *testing.T) {
	for _, sort := range []string{SortOldest, SortNewest} {
		t.Run(sort, func(t *testing.T) {
			const n = 60
			m, _, ids := pendingManager(t, n, func(int) string { return "delete_user" })
			h := NewHandler(m, testAuth(), Options{Workflow: testWorkflows})
			decided := map[string]bool{}
			var seen []string
			cur := ""
			for page := 0; ; page++ {
				if page > n {
					t.Fatal("cursor never ended")
				}
				p := "/api/v1/approvals?limit=7&sort=" + sort
				if cur != "" {
					p += "&cursor=" + url.QueryEscape(cur)
				}
				lr := getPage(t, h, p)
				for _, v := range lr.Approvals {
					seen = append(seen, v.TaskID)
				}
				// between pages: decide one already shown and one not yet shown
				for _, id := range []string{ids[(page*11)%n], ids[(page*17+5)%n]} {
					if _, err := m.Reject(context.Background(), id, "alice", ""); err == nil {
						decided[id] = true
					}
				}
				if cur = lr.NextCursor; cur == "" {
					break
				}
			}
			want := slices.Clone(ids)
			if sort == SortNewest {
				slices.Reverse(want)
			}
			pos := map[string]int{}
			for i, id := range seen {
				if _, dup := pos[id]; dup {
					t.Fatalf("%s shown twice", id)
				}
				pos[id] = i
			}
			last := -1
			for _, id := range want {
				i, ok := pos[id]
				if !ok {
					if !decided[id] {
						t.Errorf("%s stayed pending but was never shown", id)
					}
					continue
				}
				if i < last {
					t.Errorf("%s shown out of order", id)
				}
				last = i
			}
		})
	}
}
