package bufpool

import "testing"

func TestRecycleBounds(t *testing.T) {
	Recycle(make([]byte, 10, 100), 1000) // at or below min: not kept
	Recycle(make([]byte, 0, MaxRecycled+1), 0)
	if b, ok := Recycled(); ok {
		t.Fatalf("kept a buffer of capacity %d outside the bounds", cap(b))
	}
}

func TestBufferFits(t *testing.T) {
	b := Buffer(1000, 24)
	if len(b) != 0 || cap(b) != 1024 {
		t.Fatalf("new buffer len %d cap %d, want 0 and n+slack", len(b), cap(b))
	}
	if p := Piece(); len(p) != PieceSize {
		t.Fatalf("piece of %d bytes", len(p))
	} else {
		PutPiece(p[:10])
	}
}
