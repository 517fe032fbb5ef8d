package intercept

import (
	"strings"

	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// Upstream sessions for bridged 2026-07-28 requests (a legacy-only upstream) live in an
// upstream.Pool keyed by owner; what an owner is — the task owner model — is intercept's, and
// is decided here (docs/eras.md "legacy-only upstream").

// bridgeOwner is whose upstream session a bridged request uses: its identity or credential
// owner, or "" for an anonymous caller (no identity, no Authorization), who gets a session of
// its own for the request.
func bridgeOwner(x *Exchange) string {
	if x.Subject == "" && strings.TrimSpace(x.HTTP.Header.Get("Authorization")) == "" {
		return ""
	}
	return x.Owner
}

// taskBridgeOwner is bridgeOwner for an approved 2026-07-28 task's execution: the task's
// owner (identity or credential hash), or "" for an anonymous caller's task, which gets a
// session of its own.
func taskBridgeOwner(owner string) string {
	if owner == "" || tasks.IsAnonymous(owner) {
		return ""
	}
	return owner
}
