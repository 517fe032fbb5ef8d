package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

var bucketTasks = []byte("tasks")

// File is the embedded durable backend (tasks.store.type: file) on a bbolt database. bbolt
// locks the file, so one process owns it; the in-memory index mirrors the file's indexed
// fields and answers lookups, listings and quota checks, every change is committed to disk
// before the index changes. A record's Data (the encoded task, most of its size) stays on disk
// only and is read back from the file's memory map when a record is returned, so a pending
// approval costs its index entry in the process, not its whole task (docs/PERFORMANCE.md).
type File struct {
	mu      sync.Mutex
	path    string
	db      *bolt.DB
	ix      *index
	closed  bool
	skipped int // records OpenFile could not decode

	sessions knownSet // sessions_file.go
}

var (
	_ Store   = (*File)(nil)
	_ Checker = (*File)(nil)
	_ Pager   = (*File)(nil)
)

var bucketMeta = []byte("meta")

// minFreeBytes is the free space below which Check reports the disk full: bbolt grows the
// file in steps, and a task write that needs a step fails.
const minFreeBytes = 1 << 20

// fileRecord is a Record as stored on disk.
type fileRecord struct {
	ID        string    `json:"id"`
	Owner     string    `json:"owner"`
	Source    string    `json:"source,omitempty"`
	State     string    `json:"state"`
	Pending   bool      `json:"pending"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	ArgBytes  int64     `json:"arg_bytes"`
	Version   uint64    `json:"version"`
	Data      []byte    `json:"data"` // base64, so the bytes come back exactly
	Key       string    `json:"key,omitempty"`
	Delivered bool      `json:"delivered,omitempty"`
}

// fileMeta is a fileRecord whose Data is checked but not kept, as OpenFile reads it.
type fileMeta struct {
	Data      dataCheck `json:"data"`
	ID        string    `json:"id"`
	Owner     string    `json:"owner"`
	Source    string    `json:"source,omitempty"`
	State     string    `json:"state"`
	Pending   bool      `json:"pending"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	ArgBytes  int64     `json:"arg_bytes"`
	Version   uint64    `json:"version"`
	Key       string    `json:"key,omitempty"`
	Delivered bool      `json:"delivered,omitempty"`
}

// dataCheck checks that a stored record's data is base64 as encoding/json wrote it, through a
// small buffer, without keeping it (a record that does not decode is skipped at open, as
// before).
type dataCheck struct{}

func (*dataCheck) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' || bytes.IndexByte(b, '\\') >= 0 {
		var d []byte // not as encoding/json writes it: decode it the long way
		return json.Unmarshal(b, &d)
	}
	b = b[1 : len(b)-1]
	var buf [3 << 10]byte
	for len(b) > 0 {
		n := min(len(b), 4<<10) // whole quanta of 4 characters, 3 bytes each
		if _, err := base64.StdEncoding.Decode(buf[:], b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (m fileMeta) record() Record {
	return Record{ID: m.ID, Owner: m.Owner, Source: m.Source, State: m.State, Pending: m.Pending, CreatedAt: m.CreatedAt,
		ExpiresAt: m.ExpiresAt, ArgBytes: m.ArgBytes, Version: m.Version, Key: m.Key, Delivered: m.Delivered}
}

// ErrCorrupt is returned by OpenFile when the store file fails bbolt's consistency check or
// bbolt panics reading it (a torn write, a bad disk block): the file must be moved aside, it
// cannot be trusted to hold tasks. docs/SECURITY.md "Storage".
var ErrCorrupt = errors.New("the store file is corrupt")

// maxCheckErrors is how many of bbolt's consistency errors an ErrCorrupt names.
const maxCheckErrors = 3

// OpenFile opens (or creates) the store at path (config tasks.store.path) and loads its index.
// It fails after a few seconds if another process holds the file. An existing file is first
// checked read-only (bbolt's Tx.Check, every page) so a corrupt one fails with ErrCorrupt
// instead of panicking later in bbolt ("assertion failed: Page expected to be …"), which made
// every start crash. A record that does not decode is skipped and counted (Skipped).
func OpenFile(path string) (*File, error) {
	if path == "" {
		return nil, fmt.Errorf("file task store: empty path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("file task store %s: %w", path, err)
	}
	if err := checkFile(path); err != nil {
		return nil, fmt.Errorf("file task store %s: %w", path, err)
	}
	db, err := openBolt(path, &bolt.Options{Timeout: 3 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("file task store %s: %w", path, err)
	}
	f := &File{path: path, db: db, ix: newIndex()}
	err = guard(func() error {
		return db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bucketTasks)
			if err != nil {
				return err
			}
			return b.ForEach(func(k, v []byte) error {
				// Decoded without Data: the arguments stay in the file (read back when a
				// record is returned), so opening a full store does not hold them all.
				var fm fileMeta
				if err := json.Unmarshal(v, &fm); err != nil || fm.ID != string(k) {
					f.skipped++ // kept on disk for inspection; never in the index
					return nil
				}
				rec := fm.record()
				f.ix.put(rec) // the order of pending records (Page) is rebuilt here too
				f.ix.claim(rec)
				return nil
			})
		})
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("file task store %s: %w", path, err)
	}
	return f, nil
}

// Skipped is how many stored records OpenFile could not decode and left out.
func (f *File) Skipped() int { return f.skipped }

// checkFile runs bbolt's consistency check over an existing store file, read-only (a shared
// lock: a file another process holds still times out as before). A missing or empty file is
// a new store.
func checkFile(path string) error {
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		return nil
	}
	db, err := openBolt(path, &bolt.Options{ReadOnly: true, Timeout: 3 * time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	return guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			var problems []string
			n := 0
			for err := range tx.Check() { // drained whole: Check's goroutine ends with it
				if n++; len(problems) < maxCheckErrors {
					problems = append(problems, err.Error())
				}
			}
			if n > 0 {
				return fmt.Errorf("%w: %d problem(s) found by the consistency check: %s", ErrCorrupt, n, strings.Join(problems, "; "))
			}
			return nil
		})
	})
}

// openBolt is bolt.Open with a panic (a corrupt meta or freelist page) as ErrCorrupt, and
// bbolt's own "not a valid database" errors as ErrCorrupt too.
func openBolt(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	err = guard(func() error {
		var err error
		db, err = bolt.Open(path, 0o600, opts)
		return err
	})
	if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrVersionMismatch) {
		err = fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return db, err
}

// guard runs fn, turning a bbolt panic into ErrCorrupt: bbolt asserts on pages it cannot
// read, and one bad page must not take the process (and both listeners) down.
func guard(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
	}()
	return fn()
}

// withData returns r with its Data read from the file.
func (f *File) withData(r Record) (Record, error) {
	rs, err := f.withDataAll([]Record{r})
	if err != nil {
		return Record{}, err
	}
	return rs[0], nil
}

// withDataAll fills the Data of every record in rs from the file, in one read transaction.
func (f *File) withDataAll(rs []Record) ([]Record, error) {
	if len(rs) == 0 {
		return rs, nil
	}
	err := guard(func() error {
		return f.db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketTasks)
			for i := range rs {
				v := b.Get([]byte(rs[i].ID))
				var d struct {
					Data []byte `json:"data"`
				}
				if v == nil {
					return fmt.Errorf("task %s is indexed but not in the file", rs[i].ID)
				}
				if err := json.Unmarshal(v, &d); err != nil {
					return fmt.Errorf("task %s: %w", rs[i].ID, err)
				}
				rs[i].Data = d.Data // decoded into a new slice: valid after the transaction
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("file task store: read: %w", err)
	}
	return rs, nil
}

// indexed is rec as the index keeps it: without Data.
func indexed(rec Record) Record {
	rec.Data = nil
	return rec
}

func (f *File) write(rec Record) error {
	b, err := json.Marshal(fileRecord(rec))
	if err != nil {
		return err
	}
	return guard(func() error {
		return f.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketTasks).Put([]byte(rec.ID), b)
		})
	})
}

func (f *File) Create(ctx context.Context, rec Record, lim Limits) (Record, error) {
	rec.Key = "" // Create never takes a key's place
	r, _, err := f.CreateOrAttach(ctx, rec, lim, time.Time{})
	return r, err
}

func (f *File) CreateOrAttach(_ context.Context, rec Record, lim Limits, now time.Time) (Record, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return Record{}, false, ErrClosed
	}
	if r, ok := f.ix.attached(rec.Key, now); ok {
		r, err := f.withData(r)
		return r, err == nil, err
	}
	if err := f.ix.checkCreate(rec, lim); err != nil {
		return Record{}, false, err
	}
	rec.Version = 1
	if err := f.write(rec); err != nil {
		return Record{}, false, fmt.Errorf("file task store: create task %s: %w", rec.ID, err)
	}
	f.ix.put(indexed(rec))
	f.ix.claim(rec)
	return rec, false, nil
}

func (f *File) Keyed(_ context.Context, key string) (Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return Record{}, ErrClosed
	}
	r, ok := f.ix.keyed(key)
	if !ok {
		return Record{}, ErrNotFound
	}
	return f.withData(r)
}

func (f *File) Get(_ context.Context, id string) (Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return Record{}, ErrClosed
	}
	r, ok := f.ix.get(id)
	if !ok {
		return Record{}, ErrNotFound
	}
	return f.withData(r)
}

func (f *File) Update(_ context.Context, rec Record, expect uint64) (Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return Record{}, ErrClosed
	}
	next, err := f.ix.checkUpdate(rec, expect)
	if err != nil {
		return Record{}, err
	}
	if err := f.write(next); err != nil {
		return Record{}, fmt.Errorf("file task store: update task %s: %w", rec.ID, err)
	}
	f.ix.put(indexed(next))
	return next, nil
}

func (f *File) Delete(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	if _, ok := f.ix.recs[id]; !ok {
		return nil
	}
	err := guard(func() error {
		return f.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketTasks).Delete([]byte(id)) })
	})
	if err != nil {
		return fmt.Errorf("file task store: delete task %s: %w", id, err)
	}
	f.ix.drop(id)
	return nil
}

func (f *File) List(_ context.Context, flt Filter) ([]Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ErrClosed
	}
	if flt.NoData {
		return f.ix.list(flt), nil
	}
	return f.withDataAll(f.ix.list(flt))
}

// Page reads one bounded stretch of the ordered index of pending records (Pager); only the
// records read are read from the file.
func (f *File) Page(_ context.Context, q PageQuery) (PageResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return PageResult{}, ErrClosed
	}
	res := f.ix.page(q)
	var err error
	res.Records, err = f.withDataAll(res.Records)
	return res, err
}

func (f *File) Usage(_ context.Context, owner string) (Usage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return Usage{}, ErrClosed
	}
	return f.ix.usage(owner), nil
}

// Check reports a full or nearly full filesystem under the store file, and otherwise commits
// one small write (bucket meta, outside the tasks), which fails on a read-only or failing
// disk. A file store never loses its data while open: lost is always false.
func (f *File) Check(context.Context) (lost bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false, ErrClosed
	}
	if free, ok := freeBytes(filepath.Dir(f.path)); ok && free < minFreeBytes {
		return false, fmt.Errorf("file task store: no space left on the disk holding %s (%d bytes free)", f.path, free)
	}
	err = guard(func() error {
		return f.db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bucketMeta)
			if err != nil {
				return err
			}
			return b.Put([]byte("checked"), []byte(time.Now().UTC().Format(time.RFC3339)))
		})
	})
	if err != nil {
		return false, fmt.Errorf("file task store %s: %w", f.path, err)
	}
	return false, nil
}

func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	return f.db.Close()
}
