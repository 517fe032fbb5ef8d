package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// BackupPath is the admin listener's online backup of the file task store
// (docs/operations.md "Backup and restore").
const BackupPath = "/api/v1/backup"

// backupStore is a store that can copy itself consistently while in use (*store.File).
type backupStore interface {
	Backup(w io.Writer) (int64, error)
}

// backup streams a consistent copy of the file store. Only the approver "admin"
// ($TOLLGATE_ADMIN_TOKEN) may take one: the copy holds every task's exact arguments and
// results, which approvers see redacted. A memory store has nothing durable to copy, and a
// Redis store is backed up by Redis's own persistence.
func (s *Server) backup(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	scheme, tok, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	name, ok := "", false
	if strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(tok) != "" {
		name, ok = s.approvers.Approver(strings.TrimSpace(tok))
	}
	switch {
	case !ok:
		w.Header().Set("WWW-Authenticate", "Bearer")
		backupError(w, http.StatusUnauthorized, "unauthorized", "a valid admin bearer token is required (Authorization: Bearer $TOLLGATE_ADMIN_TOKEN)")
		return
	case name != config.AdminApprover:
		backupError(w, http.StatusForbidden, "not_authorized", "only the approver admin ($TOLLGATE_ADMIN_TOKEN) may take a backup: it holds every call's unredacted arguments and results")
		return
	}
	b, ok := s.store.(backupStore)
	if !ok {
		backupError(w, http.StatusConflict, "no_file_store", "the task store is not a file store: a memory store holds nothing durable, and a Redis store is backed up by Redis (docs/operations.md)")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="tollgate-tasks-`+time.Now().UTC().Format("20060102T150405Z")+`.db"`)
	n, err := b.Backup(w)
	if err != nil {
		s.log.Error("backup failed", "bytes", strconv.FormatInt(n, 10), "error", err.Error())
		// The status is sent; only a cut connection tells the client the copy is incomplete.
		panic(http.ErrAbortHandler)
	}
	s.log.Info("backup taken", "bytes", n, "remote", r.RemoteAddr)
}

func backupError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "message": msg})
}
