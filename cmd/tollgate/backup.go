package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/approval"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

const backupUsage = `Usage: tollgate backup --out FILE [--url ADMIN_URL]

Copies the running gateway's file task store, consistently and without stopping it, into FILE
(a new file, mode 0600), through GET /api/v1/backup on the admin listener, then checks the copy
(bbolt's consistency check, every record decoded).
  --url   the admin listener (default $TOLLGATE_ADMIN_URL, else http://127.0.0.1:7469)
The token is $TOLLGATE_ADMIN_TOKEN, or the file $TOLLGATE_ADMIN_TOKEN_FILE names (approver "admin"). Restore: docs/operations.md
"Backup and restore" — and keep <store path>.key with the copy.
`

func cmdBackup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tollgate backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, backupUsage) }
	out := fs.String("out", "", "")
	adminURL := fs.String("url", "", "")
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil || *out == "" || fs.NArg() > 0 {
		if err == nil {
			fs.Usage()
		}
		return 2
	}
	base := *adminURL
	if base == "" {
		base = os.Getenv("TOLLGATE_ADMIN_URL")
	}
	if base == "" {
		base = "http://127.0.0.1:7469"
	}
	token, err := approval.AdminToken(os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate backup:", err)
		return 1
	}
	sum, n, err := takeBackup(ctx, strings.TrimRight(base, "/"), token, *out)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate backup: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %d bytes, %s (%d not finished)%s\n", *out, n, count(sum.Tasks, "task", "tasks"), sum.Open, skippedNote(sum.Skipped))
	fmt.Fprintln(stdout, "Keep the store's key file (the store's path with .key appended — the gateway's start-up log line \"task store\" gives that path — or $TOLLGATE_ARGUMENT_HASH_KEY) with it: a restore needs both.")
	return 0
}

func skippedNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %s that do not decode", count(n, "record", "records"))
}

// takeBackup downloads the copy to out+".partial", verifies it and renames it to out.
func takeBackup(ctx context.Context, base, token, out string) (store.BackupSummary, int64, error) {
	var sum store.BackupSummary
	if token == "" {
		return sum, 0, errors.New("neither $TOLLGATE_ADMIN_TOKEN nor $TOLLGATE_ADMIN_TOKEN_FILE is set (the backup needs approver admin's token)")
	}
	if _, err := os.Stat(out); err == nil {
		return sum, 0, fmt.Errorf("%s exists; choose a new file", out)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/backup", nil)
	if err != nil {
		return sum, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return sum, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return sum, 0, fmt.Errorf("GET %s/api/v1/backup: %s: %s", base, resp.Status, strings.TrimSpace(string(msg)))
	}
	tmp := out + ".partial"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return sum, 0, err
	}
	n, err := io.Copy(f, resp.Body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		sum, err = store.VerifyBackup(tmp)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return sum, n, fmt.Errorf("the copy is incomplete or damaged, nothing kept: %w", err)
	}
	return sum, n, os.Rename(tmp, out)
}
