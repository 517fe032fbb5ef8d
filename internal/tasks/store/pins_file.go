package store

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// bucketPins holds the pinned tool definitions: tool name → encodePin(version, data). Read
// from disk on every call (pins are read rarely: package pins keeps its own copy).
var bucketPins = []byte("pins")

func (f *File) GetPin(_ context.Context, tool string) (PinRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return PinRecord{}, ErrClosed
	}
	var rec PinRecord
	err := f.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPins)
		if b == nil {
			return ErrNotFound
		}
		v := b.Get([]byte(tool))
		if v == nil {
			return ErrNotFound
		}
		var err error
		rec, err = decodePin(tool, v)
		return err
	})
	return rec, err
}

func (f *File) ListPins(_ context.Context) ([]PinRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ErrClosed
	}
	var out []PinRecord
	err := f.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPins)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error { // keys in byte order: ordered by tool
			rec, err := decodePin(string(k), v)
			if err != nil {
				return err
			}
			out = append(out, rec)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("file task store: list pins: %w", err)
	}
	return out, nil
}

func (f *File) PutPin(_ context.Context, rec PinRecord, expect uint64, maxPins int) (PinRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return PinRecord{}, ErrClosed
	}
	err := f.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketPins)
		if err != nil {
			return err
		}
		var cur uint64
		v := b.Get([]byte(rec.Tool))
		if v != nil {
			c, err := decodePin(rec.Tool, v)
			if err != nil {
				return err
			}
			cur = c.Version
		}
		if cur != expect {
			return ErrVersionConflict
		}
		if v == nil && maxPins > 0 {
			if n := b.Stats().KeyN; n >= maxPins {
				return pinQuota(n, maxPins)
			}
		}
		rec.Version = expect + 1
		return b.Put([]byte(rec.Tool), encodePin(rec.Version, rec.Data))
	})
	if err != nil {
		return PinRecord{}, err
	}
	rec.Data = append([]byte(nil), rec.Data...)
	return rec, nil
}

func (f *File) DeletePin(_ context.Context, tool string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	return f.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPins)
		if b == nil {
			return nil
		}
		return b.Delete([]byte(tool))
	})
}
