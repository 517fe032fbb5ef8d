package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketSessions holds the known session set: keyed hash → expiry (Unix nanoseconds, 8 bytes
// big-endian). It is mirrored in memory on first use; expired entries are dropped then.
var bucketSessions = []byte("sessions")

// loadSessions reads the bucket into f.sessions once. Called with f.mu held.
func (f *File) loadSessions(now time.Time) error {
	if f.sessions.loaded {
		return nil
	}
	f.sessions.m = map[string]time.Time{}
	err := f.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketSessions)
		if err != nil {
			return err
		}
		var expired [][]byte
		err = b.ForEach(func(k, v []byte) error {
			if len(v) != 8 {
				expired = append(expired, k) // not ours: drop it
				return nil
			}
			exp := time.Unix(0, int64(binary.BigEndian.Uint64(v)))
			if !now.Before(exp) {
				expired = append(expired, k)
				return nil
			}
			f.sessions.m[string(k)] = exp
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range expired {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("file task store: load sessions: %w", err)
	}
	f.sessions.loaded = true
	return nil
}

func (f *File) RememberSession(_ context.Context, id string, expires time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	now := time.Now()
	if err := f.loadSessions(now); err != nil {
		return err
	}
	if !now.Before(expires) {
		return f.forgetSession(id)
	}
	dropped := f.sessions.victims(id, now) // the mirror changes only after the commit
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(expires.UnixNano()))
	err := f.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSessions)
		for _, k := range dropped {
			if err := b.Delete([]byte(k)); err != nil {
				return err
			}
		}
		return b.Put([]byte(id), v[:])
	})
	if err != nil {
		return fmt.Errorf("file task store: remember session: %w", err)
	}
	for _, k := range dropped {
		delete(f.sessions.m, k)
	}
	f.sessions.m[id] = expires
	return nil
}

func (f *File) SessionKnown(_ context.Context, id string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false, ErrClosed
	}
	now := time.Now()
	if err := f.loadSessions(now); err != nil {
		return false, err
	}
	return f.sessions.has(id, now), nil
}

func (f *File) ForgetSession(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	if err := f.loadSessions(time.Now()); err != nil {
		return err
	}
	return f.forgetSession(id)
}

// forgetSession deletes id from the bucket and the mirror. Called with f.mu held.
func (f *File) forgetSession(id string) error {
	if _, ok := f.sessions.m[id]; !ok {
		return nil
	}
	err := f.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketSessions).Delete([]byte(id)) })
	if err != nil {
		return fmt.Errorf("file task store: forget session: %w", err)
	}
	delete(f.sessions.m, id)
	return nil
}
