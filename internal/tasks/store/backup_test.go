package store_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// TestFileBackup: a backup taken while records are being created is a store file that
// VerifyBackup accepts and OpenFile opens with every record committed before the copy began;
// a cut-off copy (a connection lost mid-download) is refused, so `tollgate backup` never keeps it.
func TestFileBackup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, err := store.OpenFile(filepath.Join(dir, "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	now := time.Now()
	create := func(id string) error {
		_, err := f.Create(ctx, store.Record{ID: id, Owner: "o", State: "awaiting_approval", Pending: true, CreatedAt: now,
			ExpiresAt: now.Add(time.Hour), Data: []byte(`{"x":1}`)}, store.Limits{})
		return err
	}
	for i := range 50 {
		if err := create(fmt.Sprintf("before-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // writers go on during the copy
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := create(fmt.Sprintf("during-%d", i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var buf bytes.Buffer
	n, err := f.Backup(&buf)
	close(stop)
	wg.Wait()
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("Backup: %d bytes (%d written), %v", n, buf.Len(), err)
	}
	copyPath := filepath.Join(dir, "copy.db")
	if err := os.WriteFile(copyPath, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	sum, err := store.VerifyBackup(copyPath)
	if err != nil || sum.Tasks < 50 || sum.Open != sum.Tasks || sum.Skipped != 0 {
		t.Fatalf("VerifyBackup: %+v %v", sum, err)
	}
	restored, err := store.OpenFile(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := restored.Get(ctx, fmt.Sprintf("before-%d", i)); err != nil {
			t.Errorf("before-%d not in the restored copy: %v", i, err)
		}
	}
	restored.Close()

	cut := filepath.Join(dir, "cut.db")
	if err := os.WriteFile(cut, buf.Bytes()[:buf.Len()/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if sum, err := store.VerifyBackup(cut); err == nil {
		t.Errorf("a copy cut in half verified: %+v", sum)
	}
}
