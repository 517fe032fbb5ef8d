package jsonrpc

import (
	"bytes"
	"encoding/json"
	"sync"
	"unicode/utf8"
)

// ReplyMemo remembers the last few replies that were parsed, checked and rewritten, keyed by
// their exact bytes apart from the id, so the same reply to a later request (a client listing
// the same 1000 tools again) is answered by splicing in that request's id: no parse, no
// well-formedness scan, no rewrite. A lookup compares bytes, so a changed reply is a miss by
// construction; Invalidate drops everything when what the rewrite depends on outside the reply
// changes (a reload, a new upstream session, list_changed). Bounded in entries and bytes.
type ReplyMemo struct {
	mu      sync.Mutex
	gen     uint64
	entries []memoEntry // oldest first
	size    int
}

type memoEntry struct {
	tag             string
	pre, post       []byte // the upstream's reply before and after its id
	outPre, outPost []byte // what the client was sent, before and after its id
}

func (e *memoEntry) bytes() int { return len(e.pre) + len(e.post) + len(e.outPre) + len(e.outPost) }

const (
	memoEntries  = 16       // the pages of a long list, in both eras
	memoMaxBytes = 16 << 20 // in total; a larger reply is not remembered
)

// Gen is the memo's generation: take it before the work whose result Store records, so a
// result computed across an Invalidate is not stored.
func (c *ReplyMemo) Gen() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// Invalidate forgets every reply and starts a new generation.
func (c *ReplyMemo) Invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.entries, c.size = nil, 0
}

// Len is the number of replies remembered.
func (c *ReplyMemo) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Lookup returns what to send, around the client's id, for the reply raw to the request
// whose id is reqID, when raw is a remembered reply (under tag) with only its id changed and
// that id is one Parse accepts and SameID matches to reqID (as CheckReply would require).
func (c *ReplyMemo) Lookup(tag string, raw []byte, reqID json.RawMessage) (pre, post []byte, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.entries) - 1; i >= 0; i-- {
		e := &c.entries[i]
		if e.tag != tag || len(raw) <= len(e.pre)+len(e.post) ||
			!bytes.HasPrefix(raw, e.pre) || !bytes.HasSuffix(raw, e.post) {
			continue
		}
		if id := raw[len(e.pre) : len(raw)-len(e.post)]; plainID(id) && SameID(id, reqID) {
			return e.outPre, e.outPost, true
		}
	}
	return nil, nil, false
}

// plainID reports whether id is a string or number id exactly as Parse reads one.
func plainID(id []byte) bool {
	if id[0] == '"' {
		e, err := validString(id, 0)
		return err == nil && e == len(id) && utf8.Valid(id)
	}
	e, err := validNumber(id, 0)
	return err == nil && e == len(id)
}

// Store remembers that reply (a well-formed result, as the upstream sent it) was answered with
// out (a message with the client's id), unless the memo was invalidated since gen.
func (c *ReplyMemo) Store(gen uint64, tag string, reply *Message, out []byte) {
	if reply.Result == nil || !reply.id.ok() || !plainID(reply.ID) {
		return
	}
	om, err := Parse(out)
	if err != nil || !om.id.ok() {
		return
	}
	e := memoEntry{tag: tag,
		pre: bytes.Clone(reply.Raw[:reply.id.start]), post: bytes.Clone(reply.Raw[reply.id.end:]),
		outPre: bytes.Clone(out[:om.id.start]), outPost: bytes.Clone(out[om.id.end:])}
	if e.bytes() > memoMaxBytes/memoEntries {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	for i := range c.entries {
		if c.entries[i].tag == tag && bytes.Equal(c.entries[i].pre, e.pre) && bytes.Equal(c.entries[i].post, e.post) {
			return // a concurrent request stored it first
		}
	}
	for len(c.entries) > 0 && (len(c.entries) >= memoEntries || c.size+e.bytes() > memoMaxBytes) {
		c.size -= c.entries[0].bytes()
		c.entries = c.entries[1:]
	}
	c.entries = append(c.entries, e)
	c.size += e.bytes()
}
