package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Backup writes a consistent copy of the whole store file to w while Tollgate keeps running:
// one bbolt read transaction sees the file as of its start, and writers go on meanwhile
// (docs/operations.md "Backup and restore"). The copy is a store file: put it at
// tasks.store.path, with the <path>.key file beside it, to restore.
func (f *File) Backup(w io.Writer) (int64, error) {
	var n int64
	err := f.db.View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}

// BackupSummary is what VerifyBackup found in a backup file.
type BackupSummary struct {
	Tasks   int // records
	Open    int // of which not finished (awaiting a decision, approved or executing)
	Skipped int // records that do not decode (a restore leaves them out, as OpenFile does)
}

// VerifyBackup checks a backup (or any store file) that no process holds: bbolt's consistency
// check over every page, then every record decoded. It never writes to the file.
func VerifyBackup(path string) (BackupSummary, error) {
	var s BackupSummary
	if err := checkFile(path); err != nil {
		return s, err
	}
	db, err := openBolt(path, &bolt.Options{ReadOnly: true, Timeout: 3 * time.Second})
	if err != nil {
		return s, err
	}
	defer db.Close()
	err = guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketTasks)
			if b == nil {
				return fmt.Errorf("%s holds no tasks bucket: not a Tollgate task store", path)
			}
			return b.ForEach(func(k, v []byte) error {
				var fr fileRecord
				if err := json.Unmarshal(v, &fr); err != nil || fr.ID != string(k) {
					s.Skipped++
					return nil
				}
				s.Tasks++
				if fr.Pending {
					s.Open++
				}
				return nil
			})
		})
	})
	return s, err
}

// WriteFileRecords stores recs (as stored: versions kept) in the file store at path, which no
// process holds, in one transaction, without quotas. It fills large stores for benchmarks and
// tests (one Create is one fsync); OpenFile then indexes them as any store file.
func WriteFileRecords(path string, recs []Record) error {
	db, err := openBolt(path, &bolt.Options{Timeout: 3 * time.Second})
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketTasks)
		if err != nil {
			return err
		}
		for _, r := range recs {
			v, err := json.Marshal(fileRecord(r))
			if err != nil {
				return err
			}
			if err := b.Put([]byte(r.ID), v); err != nil {
				return err
			}
		}
		return nil
	})
	return errors.Join(err, db.Close())
}
