package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
)

// benchRecords holds, per count, the stored records of that many pending calls (made once by a
// real task manager, then copied into each backend).
var benchRecords = map[int][]store.Record{}

func pendingRecords(b *testing.B, n int) []store.Record {
	if rs, ok := benchRecords[n]; ok {
		return rs
	}
	mem := store.NewMemory()
	m := tasks.NewManager(mem, okExec{}, nil, tasks.Options{Workflow: benchWorkflows,
		Quotas: config.Quotas{MaxPendingPerOwner: n, MaxPendingTotal: n}})
	ctx := context.Background()
	for i := range n {
		if _, err := m.Create(ctx, tasks.CreateRequest{Owner: fmt.Sprintf("session:%d", i%50), RequestedBy: "carol", Tool: "delete_user",
			Arguments: json.RawMessage(fmt.Sprintf(`{"user":"u%d","password":"x","region":"eu"}`, i)), Workflow: "default"}); err != nil {
			b.Fatal(err)
		}
	}
	_ = m.Close()
	rs, err := mem.List(ctx, store.Filter{})
	if err != nil || len(rs) != n {
		b.Fatalf("%d records, %v", len(rs), err)
	}
	benchRecords[n] = rs
	return rs
}

func benchWorkflows(string) (config.Workflow, bool) {
	return config.Workflow{Timeout: config.Duration(time.Hour), RedactFields: []string{"password"}}, true
}

// filledStore returns a store of kind holding recs.
func filledStore(b *testing.B, kind string, recs []store.Record) store.Store {
	ctx := context.Background()
	switch kind {
	case "memory":
		st := store.NewMemory()
		for _, r := range recs {
			if _, err := st.Create(ctx, r, store.Limits{}); err != nil {
				b.Fatal(err)
			}
		}
		return st
	case "file":
		path := filepath.Join(b.TempDir(), "tasks.db")
		if err := store.WriteFileRecords(path, recs); err != nil {
			b.Fatal(err)
		}
		st, err := store.OpenFile(path)
		if err != nil {
			b.Fatal(err)
		}
		return st
	default:
		base := storetest.RedisURL(b)
		prefix := fmt.Sprintf("tollgate-bench:%d:%d:", os.Getpid(), len(recs))
		u, _ := url.Parse(base)
		q := u.Query()
		q.Set("key_prefix", prefix)
		u.RawQuery = q.Encode()
		opt, _ := redis.ParseURL(base)
		raw := redis.NewClient(opt)
		b.Cleanup(func() { // matters with TOLLGATE_TEST_REDIS_URL
			defer raw.Close()
			for {
				keys, err := raw.Keys(ctx, prefix+"*").Result()
				if err != nil || len(keys) == 0 {
					return
				}
				for i := 0; i < len(keys); i += 1000 {
					raw.Del(ctx, keys[i:min(i+1000, len(keys))]...)
				}
			}
		})
		st, err := store.OpenRedis(ctx, u.String())
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			if _, err := st.Create(ctx, r, store.Limits{}); err != nil {
				b.Fatal(err)
			}
		}
		return st
	}
}

// BenchmarkApprovalsPage serves one page of GET /api/v1/approvals (100 rows, the API's
// default) through the real task manager over each store holding 100, 10,000 and 100,000
// pending calls: sort=oldest and sort=newest read the ordered index of pending tasks;
// sort=expiry still reads every pending task, as every page did before the index.
// docs/PERFORMANCE.md "Approvals page".
func BenchmarkApprovalsPage(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000} {
		for _, kind := range []string{"memory", "file", "redis"} {
			b.Run(fmt.Sprintf("%s/pending=%d", kind, n), func(b *testing.B) {
				st := filledStore(b, kind, pendingRecords(b, n))
				m := tasks.NewManager(st, okExec{}, nil, tasks.Options{Workflow: benchWorkflows})
				b.Cleanup(func() { _ = m.Close(); _ = st.Close() })
				h := NewHandler(m, testAuth(), Options{Workflow: benchWorkflows})
				for _, sort := range []string{SortOldest, SortNewest, SortExpiry} {
					if sort == SortExpiry && n > 10_000 && os.Getenv("TOLLGATE_BENCH_FULL") != "1" {
						continue // the full scan at 100,000: set TOLLGATE_BENCH_FULL=1
					}
					b.Run("sort="+sort, func(b *testing.B) {
						req := httptest.NewRequest(http.MethodGet, "/api/v1/approvals?sort="+sort, nil)
						req.Header.Set("Authorization", "Bearer "+aliceToken)
						for b.Loop() {
							rec := httptest.NewRecorder()
							h.ServeHTTP(rec, req)
							if rec.Code != http.StatusOK {
								b.Fatalf("%d %s", rec.Code, rec.Body)
							}
						}
					})
				}
			})
		}
	}
}
