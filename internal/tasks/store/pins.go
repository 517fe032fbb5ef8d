package store

import (
	"context"
	"encoding/binary"
	"fmt"
)

// PinRecord is one tool's pinned definition as stored (package pins encodes Data; the store
// never decodes it). Version is set by the store: 1 on the first PutPin, +1 on every one after.
type PinRecord struct {
	Tool    string
	Version uint64
	Data    []byte
}

// Pins keeps the pinned tool definitions (package pins) in the task store, so every replica
// and a restarted process see the same accepted and quarantined tools. Every backend
// implements it; storetest.RunPins is its contract. Writes are compare-and-swap on the
// version, so two replicas that see the same change write one record.
type Pins interface {
	// GetPin returns tool's pin or ErrNotFound.
	GetPin(ctx context.Context, tool string) (PinRecord, error)
	// ListPins returns every pin, ordered by tool.
	ListPins(ctx context.Context) ([]PinRecord, error)
	// PutPin stores rec.Data as rec.Tool's pin when its stored version is expect (0: no pin
	// yet) and returns the stored record; else ErrVersionConflict. A new pin when maxPins
	// (> 0) are stored already is a *QuotaError (Limit "max_tools"), nothing stored.
	PutPin(ctx context.Context, rec PinRecord, expect uint64, maxPins int) (PinRecord, error)
	// DeletePin removes tool's pin; a missing one is not an error.
	DeletePin(ctx context.Context, tool string) error
}

var (
	_ Pins = (*Memory)(nil)
	_ Pins = (*File)(nil)
	_ Pins = (*Redis)(nil)
)

// pinQuota is the error of a new pin beyond maxPins.
func pinQuota(n, maxPins int) error {
	return &QuotaError{Limit: "max_tools", Current: int64(n), Max: int64(maxPins)}
}

// encodePin is a pin as the file and Redis backends keep it: version (8 bytes big-endian)
// then Data.
func encodePin(version uint64, data []byte) []byte {
	b := make([]byte, 8+len(data))
	binary.BigEndian.PutUint64(b, version)
	copy(b[8:], data)
	return b
}

func decodePin(tool string, b []byte) (PinRecord, error) {
	if len(b) < 8 {
		return PinRecord{}, fmt.Errorf("pin %q: stored value too short", tool)
	}
	return PinRecord{Tool: tool, Version: binary.BigEndian.Uint64(b), Data: append([]byte(nil), b[8:]...)}, nil
}
