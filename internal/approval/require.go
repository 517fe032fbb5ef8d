package approval

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/logcap"
)

type requiredKey struct{}

// RequireApprover serves next only to an approver — signed in by the login proxy
// (ProxySignIn) or holding an admin bearer token — as the approvals API does; next reads the
// approver's name with ApproverName. Other admin APIs (pins) authenticate this way.
func RequireApprover(auth Authenticator, log *slog.Logger, next http.Handler) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	// Failed tokens are logged sampled: anyone who reaches the listener can send them.
	rejected := logcap.NewSampler(time.Second, 10)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		token, present := bearerToken(r)
		id, ok := SignedIn(r.Context()) // signed in by the login proxy (ProxySignIn)
		name := id.Approver
		if !ok && present && auth != nil {
			name, ok = auth.Approver(token)
		}
		if !ok {
			// RFC 6750 §3: no error code when no credentials were sent.
			challenge := "Bearer"
			if present {
				challenge = `Bearer error="invalid_token"`
				if ok, held := rejected.Allow(); ok {
					log.Warn("admin API: rejected bearer token", "remote", r.RemoteAddr, "path", r.URL.Path, "suppressed", held)
				}
			}
			w.Header().Set("WWW-Authenticate", challenge)
			writeError(w, http.StatusUnauthorized, "unauthorized", "a valid admin bearer token is required (Authorization: Bearer <token>)", nil)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requiredKey{}, name)))
	})
}

// ApproverName is the approver RequireApprover let through ("" outside it).
func ApproverName(ctx context.Context) string {
	s, _ := ctx.Value(requiredKey{}).(string)
	return s
}

// WriteError writes the admin API's error body ({"error", "message"}).
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	writeError(w, status, code, msg, nil)
}

// WriteJSON writes v as the admin API's JSON body.
func WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }
