package intercept

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

const memoPage = `{"jsonrpc":"2.0","id":ID,"result":{"tools":[{"name":"delete_x"},{"name":"read_y"}],"nextCursor":"n"}}`

// memoList lists tools as the proxy relays a tools/list (internal/proxy relay.item): from the
// Forward's memo when it holds the reply, else parse, Transform and remember. hit reports
// which.
func (h *gwHarness) memoList(t *testing.T, id string) (out []byte, hit bool) {
	t.Helper()
	x := exchange(t, nil, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/list"}`)
	f := h.router.Route(context.Background(), x).Forward
	if f == nil || f.Memo == nil {
		t.Fatal("tools/list is not forwarded with a memo")
	}
	raw := []byte(strings.Replace(memoPage, "ID", id, 1))
	if pre, post, ok := f.Memo.Memo.Lookup(f.Memo.Tag, raw, x.Msg.ID); ok {
		return bytes.Join([][]byte{pre, x.Msg.ID, post}, nil), true
	}
	m, err := jsonrpc.ParseChecked(raw)
	if err != nil {
		t.Fatal(err)
	}
	out = f.Transform(x, m)
	f.Memo.Memo.Store(f.Memo.Gen, f.Memo.Tag, m, out)
	return out, false
}

// TestListMemoInvalidation: an unchanged tools/list is answered from the memo, identical to
// its rewrite; the upstream's list_changed, a reload and a new upstream session (both end in
// Gateway.Recompute, server.watchUpstream and server.reload) make the next one a rewrite
// against what is current.
func TestListMemoInvalidation(t *testing.T) {
	prime := func(t *testing.T) *gwHarness {
		h := newHarness(t, unitConfig)
		first, hit := h.memoList(t, "1")
		if hit {
			t.Fatal("first list answered from an empty memo")
		}
		again, hit := h.memoList(t, "2")
		if !hit {
			t.Fatal("an unchanged list was rewritten again")
		}
		if want := bytes.Replace(first, []byte(`"id":1`), []byte(`"id":2`), 1); !bytes.Equal(again, want) {
			t.Fatalf("memo answer\n%s\ndiffers from the rewrite\n%s", again, want)
		}
		return h
	}
	t.Run("list_changed", func(t *testing.T) {
		h := prime(t)
		h.gw.UpstreamNotification("notifications/progress")
		if _, hit := h.memoList(t, "3"); !hit {
			t.Fatal("another notification ended the memo")
		}
		h.gw.UpstreamNotification("notifications/tools/list_changed")
		if _, hit := h.memoList(t, "4"); hit {
			t.Fatal("answered from the memo after notifications/tools/list_changed")
		}
	})
	t.Run("reload", func(t *testing.T) {
		h := prime(t)
		// delete_x goes from approve (taskSupport required under sync_approval: error) to forward.
		snap, err := governance.Build(parseUnitConfig(t, strings.Replace(unitConfig, `{match: "delete_*", action: approve}`, `{match: "delete_*", action: forward}`, 1)), nil)
		if err != nil {
			t.Fatal(err)
		}
		h.snaps.Store(snap)
		h.gw.Recompute(snap)
		out, hit := h.memoList(t, "5")
		if hit {
			t.Fatal("answered from the memo after a reload")
		}
		if bytes.Contains(out, []byte(`"name":"delete_x","execution":{"taskSupport":"required"}`)) {
			t.Fatalf("the rewrite after the reload still carries the old annotation: %s", out)
		}
	})
	t.Run("upstream_session", func(t *testing.T) {
		h := prime(t)
		h.gw.Recompute(h.snaps.Load()) // what server.watchUpstream runs after each Refresh (a new session)
		if _, hit := h.memoList(t, "6"); hit {
			t.Fatal("answered from the memo after a new upstream session")
		}
	})
}

// TestListMemoPages: each page of a paginated list (six here) is remembered on its own, listed
// again it is answered from the memo, and only the last page carries Tollgate's own tools.
func TestListMemoPages(t *testing.T) {
	h := newHarness(t, unitConfig)
	var pages []string // more pages than the memo's first bound (4) held
	for i := range 6 {
		next := fmt.Sprintf(`,"nextCursor":"p%d"`, i+1)
		if i == 5 {
			next = ""
		}
		pages = append(pages, fmt.Sprintf(`{"jsonrpc":"2.0","id":ID,"result":{"tools":[{"name":"t%d"}]%s}}`, i, next))
	}
	list := func(id, page string) (out []byte, hit bool) {
		x := exchange(t, nil, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/list"}`)
		f := h.router.Route(context.Background(), x).Forward
		raw := []byte(strings.Replace(page, "ID", id, 1))
		if pre, post, ok := f.Memo.Memo.Lookup(f.Memo.Tag, raw, x.Msg.ID); ok {
			return bytes.Join([][]byte{pre, x.Msg.ID, post}, nil), true
		}
		m, err := jsonrpc.ParseChecked(raw)
		if err != nil {
			t.Fatal(err)
		}
		out = f.Transform(x, m)
		f.Memo.Memo.Store(f.Memo.Gen, f.Memo.Tag, m, out)
		return out, false
	}
	first := make([][]byte, len(pages))
	for round, id := range []string{"1", "2", "3"} {
		for i, p := range pages {
			out, hit := list(id, p)
			if hit != (round > 0) {
				t.Fatalf("round %d page %d: answered from the memo = %v", round, i, hit)
			}
			if round == 0 {
				first[i] = out
			} else if want := bytes.Replace(first[i], []byte(`"id":1`), []byte(`"id":`+id), 1); !bytes.Equal(out, want) {
				t.Fatalf("page %d from the memo differs from its rewrite:\n%s\n%s", i, out, want)
			}
			if own := bytes.Contains(out, []byte(`"tollgate_`)); own != (i == len(pages)-1) {
				t.Fatalf("page %d carries Tollgate's tools = %v", i, own)
			}
		}
	}
}

// FuzzListMemo holds the memo to the slow path for arbitrary tools/list results (the rewrite
// seeds, and whatever the fuzzer makes of them): the upstream's reply to one request is checked
// and rewritten, and the same reply to a second request (another id) must get from the memo
// exactly what the slow path gives it, or nothing; a reply the slow path refuses is never
// remembered.
func FuzzListMemo(f *testing.F) {
	for _, s := range rewriteSeeds {
		f.Add([]byte(s), "2")
	}
	f.Add([]byte(`{"tools":[{"name":"a"}],"nextCursor":"c"}`), `"x"`)
	f.Add([]byte(`{"tools":[{"name":"tollgate_x"},{"name":"b"}]}`), `1.0`)
	g := newRewriteGateway(f)
	f.Fuzz(func(t *testing.T, result []byte, id2 string) {
		g.forgetLists()
		slow := func(id string) ([]byte, *Forward, *Exchange) {
			x := exchange(t, nil, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/list"}`)
			fw := g.toolsList(context.Background(), x).Forward
			m, err := jsonrpc.ParseChecked([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":` + string(result) + `}`))
			if err != nil || m.Kind != jsonrpc.KindResponse || !m.ValidJSON() || !jsonrpc.SameID(m.ID, x.Msg.ID) {
				return nil, fw, x // the relay would answer with a fault, never from or into the memo
			}
			out := fw.Transform(x, m)
			if out == nil {
				out = m.Raw
			}
			fw.Memo.Memo.Store(fw.Memo.Gen, fw.Memo.Tag, m, out)
			return out, fw, x
		}
		if _, err := jsonrpc.Parse([]byte(`{"id":` + id2 + `,"method":"m"}`)); err != nil || !jsonrpc.Valid([]byte(id2)) {
			return // not a request id a client could send
		}
		first, _, _ := slow("1")
		raw := []byte(`{"jsonrpc":"2.0","id":` + id2 + `,"result":` + string(result) + `}`)
		x2 := exchange(t, nil, `{"jsonrpc":"2.0","id":`+id2+`,"method":"tools/list"}`)
		fw2 := g.toolsList(context.Background(), x2).Forward
		pre, post, ok := fw2.Memo.Memo.Lookup(fw2.Memo.Tag, raw, x2.Msg.ID)
		if first == nil {
			if ok {
				t.Fatalf("a reply the slow path refuses was answered from the memo: %q", result)
			}
			return
		}
		if !ok {
			return // e.g. an id whose spelling makes the reply differ elsewhere; the slow path runs
		}
		g.forgetLists()
		want, _, _ := slow(id2)
		if got := bytes.Join([][]byte{pre, x2.Msg.ID, post}, nil); !bytes.Equal(got, want) {
			t.Fatalf("memo answer\n%s\nslow path\n%s", got, want)
		}
	})
}
