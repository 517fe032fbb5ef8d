package proxy

import (
	"context"
	"fmt"
	"io"
	"iter"
	"net/http"

	"github.com/tollgate-mcp/tollgate/internal/bufpool"
	"github.com/tollgate-mcp/tollgate/internal/sse"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// upstreamItem is one thing read from a forwarded exchange with the origin (the upstream).
// The first item of an answer carries resp; an event stream's events follow, one item each.
type upstreamItem struct {
	// resp is the answer's status and headers. With stream set it starts a 2xx event stream;
	// with json set the 2xx JSON body was read whole; with neither, the item is the whole
	// answer of another kind and the receiver owns (and closes) its unread body.
	resp   *http.Response
	stream bool
	json   []byte
	ev     *sse.Event // an event of the stream
	end    bool       // the stream ended (err: why, io.EOF when the upstream closed it); last item
	err    error      // without end: the exchange failed (no answer, or an unreadable JSON body); last item
}

// upstreamItems performs the exchange when iterated and yields what arrives; it stops when ctx
// ends or the consumer stops. The one reader for forwarded exchanges, promotable or not: a
// plain forward ranges over it on the handler's goroutine, a promotable one reads it through
// readUpstream's channel.
func (h *Handler) upstreamItems(ctx context.Context, hdr http.Header, body []byte) iter.Seq[upstreamItem] {
	return func(yield func(upstreamItem) bool) {
		resp, err := h.o.Upstream.Send(ctx, http.MethodPost, hdr, body)
		if err != nil {
			yield(upstreamItem{err: err})
			return
		}
		ok := resp.StatusCode >= 200 && resp.StatusCode < 300
		switch {
		case ok && upstream.IsEventStream(resp.Header):
			defer resp.Body.Close()
			if !yield(upstreamItem{resp: resp, stream: true}) {
				return
			}
			rd := sse.NewReader(resp.Body, 0)
			defer rd.Close()
			for {
				ev, err := rd.Next()
				if err != nil {
					yield(upstreamItem{end: true, err: err})
					return
				}
				if !yield(upstreamItem{ev: ev}) {
					return
				}
			}
		case ok && upstream.IsJSON(resp.Header):
			defer resp.Body.Close()
			b, err := readReply(resp)
			if err != nil {
				yield(upstreamItem{resp: resp, err: &upstream.Error{Fault: upstream.FaultReply, Err: err}})
				return
			}
			yield(upstreamItem{resp: resp, json: b})
		default:
			// The consumer judges the answer from its live body (relayNonReply, ReadNonReply)
			// and closes it.
			if !yield(upstreamItem{resp: resp}) {
				resp.Body.Close()
			}
		}
	}
}

// readUpstream feeds the exchange's items to a channel, closing it when done; it stops when
// ctx ends. A promotable forward selects on it together with its timers.
func (h *Handler) readUpstream(ctx context.Context, hdr http.Header, body []byte, items chan<- upstreamItem) {
	defer close(items)
	for it := range h.upstreamItems(ctx, hdr, body) {
		select {
		case items <- it:
		case <-ctx.Done():
			if it.ownsBody() {
				it.resp.Body.Close()
			}
			return
		}
	}
}

// ownsBody reports whether the item hands its receiver an unread body to close.
func (it upstreamItem) ownsBody() bool {
	return it.resp != nil && !it.stream && it.json == nil && it.err == nil
}

// drain discards the remaining items in the background so the reader can finish, closing the
// bodies it hands over.
func drain(items <-chan upstreamItem) {
	go func() {
		for it := range items {
			if it.ownsBody() {
				it.resp.Body.Close()
			}
		}
	}()
}

// maxReply bounds a JSON reply read whole (a large tools/list is about 0.5 MB).
const maxReply = 256 << 20

// readReply reads a JSON reply whole, sized by Content-Length when the upstream sent one.
// Without one (mcp-go sends none for a 400 KB tools/list) it reads into pooled pieces and
// copies them once into a buffer of the exact size: io.ReadAll's growing buffer allocated and
// zeroed about three times the reply and showed as a fifth of Tollgate's CPU per list.
func readReply(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n <= maxReply {
		b := replyBuffer(int(n))[:n]
		if _, err := io.ReadFull(resp.Body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	var pieces [][]byte
	defer func() {
		for _, p := range pieces {
			bufpool.PutPiece(p)
		}
	}()
	total := 0
	for {
		p := bufpool.Piece()
		n, err := io.ReadFull(resp.Body, p)
		pieces = append(pieces, p[:n])
		total += n
		if total > maxReply {
			return nil, fmt.Errorf("reply exceeds %d bytes", maxReply)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	b := replyBuffer(total)
	for _, p := range pieces {
		b = append(b, p...)
	}
	return b, nil
}

// replyBuffer returns an empty buffer for a reply of n bytes: for a large one, a buffer
// recycleReply gave back when it fits.
func replyBuffer(n int) []byte {
	if n > recycledReply {
		return bufpool.Buffer(n, 0)
	}
	return make([]byte, 0, n)
}

// recycleReply gives back a large reply's buffer once nothing refers to it any more.
func recycleReply(b []byte) { bufpool.Recycle(b, recycledReply) }

// recycledReply is the size above which reply buffers are recycled (a large tools/list, a
// large tool result); smaller ones are cheap to allocate.
const recycledReply = 64 << 10
