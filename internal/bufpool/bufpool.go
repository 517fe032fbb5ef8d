// Package bufpool recycles the byte buffers of large relayed messages: the fixed-size pieces a
// message of unknown length is gathered in, and the exact-size buffers the pieces are joined
// into, which a relay gives back once written (an SSE event's data, a JSON reply). One pool of
// each serves the SSE reader and the proxy's JSON replies, so a buffer of one can serve the
// other.
package bufpool

import "sync"

// PieceSize is the size of a piece.
const PieceSize = 32 << 10

// MaxRecycled bounds the buffers Recycle keeps.
const MaxRecycled = 16 << 20

var pieces = sync.Pool{New: func() any { b := make([]byte, PieceSize); return &b }}

// Piece returns a piece of PieceSize bytes; give it back with PutPiece.
func Piece() []byte { return *pieces.Get().(*[]byte) }

// PutPiece gives back a piece Piece returned (whatever its length now).
func PutPiece(p []byte) {
	p = p[:cap(p)]
	pieces.Put(&p)
}

var buffers sync.Pool

// Buffer returns an empty buffer for n bytes: one Recycle gave back when its capacity is
// between n and 2n+slack, else a new one of capacity n+slack. A recycled buffer that does not
// fit is left to the GC: the pool never hoards.
func Buffer(n, slack int) []byte {
	if p, ok := buffers.Get().(*[]byte); ok && cap(*p) >= n && cap(*p) <= 2*n+slack {
		return (*p)[:0]
	}
	return make([]byte, 0, n+slack)
}

// Recycle gives back b for a later Buffer when its capacity is above min (smaller ones are
// cheap to allocate) and at most MaxRecycled. Only once nothing refers into b any more.
func Recycle(b []byte, min int) {
	if c := cap(b); c > min && c <= MaxRecycled {
		b = b[:0]
		buffers.Put(&b)
	}
}

// Recycled returns an empty recycled buffer of whatever capacity, if the pool has one: to
// gather a message of unknown length straight into while it fits.
func Recycled() ([]byte, bool) {
	if p, ok := buffers.Get().(*[]byte); ok {
		return (*p)[:0], true
	}
	return nil, false
}
