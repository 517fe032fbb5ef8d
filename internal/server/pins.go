package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-mcp/tollgate/internal/approval"
	"github.com/tollgate-mcp/tollgate/internal/audit"
	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/pins"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// pinSync is how often a replica re-reads the pins other replicas wrote.
const pinSync = 2 * time.Second

// setupPins builds the pinned tool definitions (governance.pins) over the task store and
// hands them to the annotation cache; nil when pins are off.
func (s *Server) setupPins(ctx context.Context, cfg *config.Config) (*pins.Keeper, error) {
	pc := cfg.Governance.Pins
	var keeper *pins.Keeper
	if s.reg != nil {
		// Registered with pins off too (0), so dashboards and alerts find it.
		s.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tollgate_tools_quarantined",
			Help: "Upstream tools whose definition changed and awaits an approver (governance.pins).",
		}, func() float64 {
			if keeper == nil {
				return 0
			}
			return float64(keeper.Quarantined())
		}))
	}
	if !pc.Enabled() {
		return nil, nil
	}
	if pc.File != "" {
		pc.File = cfg.ResolvePath(pc.File) // relative to the config file, as Cedar policies
	}
	st, ok := s.store.(store.Pins)
	if !ok {
		return nil, errors.New("governance.pins: the task store keeps no pins")
	}
	k := pins.New(st, pc, s.log)
	keeper = k
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := k.Load(lctx); err != nil {
		return nil, err
	}
	s.ann.SetPins(k)
	k.OnChange(func() {
		s.gw.PinsChanged()   // forget listings; 2026-07-28 listen streams
		s.notifyLegacyList() // legacy sessions' streams
	})
	k.OnEvent(func(e pins.Event) {
		kind := map[string]audit.Kind{"quarantined": audit.KindPinQuarantined, "accepted": audit.KindPinAccepted, "rejected": audit.KindPinRejected}[e.Kind]
		s.audit.Record(audit.Event{Kind: kind, Tool: e.Tool, Actor: e.By, Reason: e.Reason, Digest: e.Digest})
		s.notifyPin(e)
	})
	return k, nil
}

// notifyPin tells governance.pins.workflow's destination (webhook, Slack) of a pin event:
// each accept and reject, and a quarantine once however often the tool changes. Only the
// replica whose store write made the event sends it.
func (s *Server) notifyPin(e pins.Event) {
	if !e.Notify() || s.notifier == nil || s.slack == nil {
		return
	}
	c := s.snaps.Load().Config
	wf, ok := c.WorkflowFor(c.Governance.Pins.Workflow)
	if !ok {
		return // removed by a reload: nowhere to send
	}
	s.notifier.OnPinEvent(e, wf)
	s.slack.OnPinEvent(e, wf)
}

// pinsAPI serves GET /api/v1/pins (the tools awaiting a decision, with a diff),
// GET /api/v1/pins/export (the pin file), POST /api/v1/pins/{tool}/accept|reject
// ({"digest": the definition shown}).
func (s *Server) pinsAPI(k *pins.Keeper) http.Handler {
	mux := http.NewServeMux()
	off := func(w http.ResponseWriter, _ *http.Request) {
		approval.WriteError(w, http.StatusNotFound, "pins_off", "pinned tool definitions are off (governance.pins.mode)")
	}
	if k == nil {
		mux.HandleFunc("/api/v1/pins", off)
		mux.HandleFunc("/api/v1/pins/", off)
		return mux
	}
	authz := approval.Authorizer{Config: func() *config.Config { return s.snaps.Load().Config }}
	// may answers 403 not_authorized unless the request's approver may decide pins
	// (governance.pins.workflow's approvers; the name was granted exactly at the door).
	may := func(w http.ResponseWriter, r *http.Request) bool {
		if err := authz.AuthorizePins(r, approval.ApproverName(r.Context())); err != nil {
			approval.WriteError(w, http.StatusForbidden, "not_authorized", err.Error())
			return false
		}
		return true
	}
	mux.HandleFunc("GET /api/v1/pins", func(w http.ResponseWriter, r *http.Request) {
		if !may(w, r) {
			return
		}
		rv, err := k.Reviews(r.Context())
		if err != nil {
			s.log.Error("pins: listing failed", "error", err.Error())
			approval.WriteError(w, http.StatusServiceUnavailable, "store_unavailable", "the task store did not answer")
			return
		}
		approval.WriteJSON(w, http.StatusOK, map[string]any{"pins": rv})
	})
	mux.HandleFunc("GET /api/v1/pins/export", func(w http.ResponseWriter, r *http.Request) {
		f, err := k.Export(r.Context())
		if err != nil {
			s.log.Error("pins: export failed", "error", err.Error())
			approval.WriteError(w, http.StatusServiceUnavailable, "store_unavailable", "the task store did not answer")
			return
		}
		approval.WriteJSON(w, http.StatusOK, f)
	})
	decide := func(accept bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if !may(w, r) {
				return
			}
			tool := r.PathValue("tool")
			var body struct {
				Digest string `json:"digest"`
			}
			b, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
			if json.Unmarshal(b, &body) != nil || body.Digest == "" {
				approval.WriteError(w, http.StatusBadRequest, "bad_request", `the body must be {"digest": "<the definition digest shown by GET /api/v1/pins>"}`)
				return
			}
			by := approval.ApproverName(r.Context())
			var err error
			if accept {
				_, err = k.Accept(r.Context(), tool, body.Digest, by)
			} else {
				_, err = k.Reject(r.Context(), tool, body.Digest, by)
			}
			switch {
			case err == nil:
				word := map[bool]string{true: "accepted", false: "rejected"}[accept]
				approval.WriteJSON(w, http.StatusOK, map[string]string{"tool": tool, "digest": body.Digest, "decision": word, "by": by})
			case errors.Is(err, pins.ErrNoPending):
				approval.WriteError(w, http.StatusNotFound, "no_pending_definition", fmt.Sprintf("no definition of tool %q awaits a decision", tool))
			case errors.Is(err, pins.ErrStale), errors.Is(err, pins.ErrUnaccepable):
				approval.WriteError(w, http.StatusConflict, "conflict", err.Error())
			default:
				s.log.Error("pins: decision failed", "tool", tool, "error", err.Error())
				approval.WriteError(w, http.StatusServiceUnavailable, "store_unavailable", "the task store did not answer")
			}
		}
	}
	mux.HandleFunc("POST /api/v1/pins/{tool}/accept", decide(true))
	mux.HandleFunc("POST /api/v1/pins/{tool}/reject", decide(false))
	return mux
}

// recheckPins re-reads the upstream's tools (Annotations.Refresh, which checks them against
// their pins) after the upstream said its tools changed, and validates the Cedar policies
// against them (cedar.validation): at most one at a time, bounded by
// server.tools_fetch_timeout.
func (s *Server) recheckPins() {
	if (s.pins == nil && !s.validatesPolicies()) || !s.pinRefresh.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.pinRefresh.Store(false)
		c := s.snaps.Load().Config
		if err := s.ann.Refresh(context.Background(), c.Server.ToolsMaxPages, c.Server.ToolsFetchTimeout.D()); err != nil {
			s.log.Warn("tools not re-checked against their pins after list_changed", "error", err.Error())
			return
		}
		s.noteToolsChanged() // a pending call's tool may be quarantined now
		changed := s.gw.Recompute(s.snaps.Load())
		s.checkPolicies(s.snaps.Load())
		if len(changed) > 0 {
			s.notifyListChanged()
		}
	}()
}
