package intercept

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// maxLimiters bounds the per-caller limiters kept (callers are sessions or identities).
const maxLimiters = 10000

// limiters holds one token bucket per caller (server.rate_limit). A reload that changes the
// rate replaces the buckets.
type limiters struct {
	mu   sync.Mutex
	conf config.RateLimit
	m    map[string]*rate.Limiter
}

// allow takes one token for owner; when none is left it returns the -32009 error with
// data.retry_after (whole seconds, at least 1).
func (l *limiters) allow(c config.RateLimit, owner string, now time.Time) *jsonrpc.Error {
	if c.RequestsPerSecond <= 0 {
		return nil
	}
	l.mu.Lock()
	if l.conf != c || l.m == nil {
		l.conf, l.m = c, map[string]*rate.Limiter{}
	}
	lim, ok := l.m[owner]
	if !ok {
		if len(l.m) >= maxLimiters {
			for k := range l.m { // drop an arbitrary caller; it starts with a full bucket again
				delete(l.m, k)
				break
			}
		}
		lim = rate.NewLimiter(rate.Limit(c.RequestsPerSecond), max(c.Burst, 1))
		l.m[owner] = lim
	}
	l.mu.Unlock()
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		secs := int(math.Ceil(d.Seconds()))
		return jsonrpc.NewError(jsonrpc.CodeRateLimited, "RateLimited",
			"Rate limit exceeded: too many tool calls; retry later (server.rate_limit)", "retry_after", max(secs, 1))
	}
	return nil
}
