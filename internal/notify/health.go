package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Health is what Tollgate knows about one webhook or Slack destination: an answer to the probe
// at start (or after a reload that added it), then the outcome of the last notification.
type Health struct {
	OK     bool
	Target string // scheme://host only: the path and query may hold the secret
	Detail string // why it is not OK (scrubbed)
	At     time.Time
}

// maxHealthEntries bounds the destinations remembered (reloads may add new ones).
const maxHealthEntries = 256

type healthTable struct {
	mu sync.Mutex
	m  map[string]Health // by full destination URL
}

func (h *healthTable) set(dest string, v Health) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= maxHealthEntries {
		h.m = map[string]Health{}
	}
	h.m[dest] = v
}

func (h *healthTable) get(dest string) (Health, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.m[dest]
	return v, ok
}

// ChannelHealth returns the last known health of the destination URL; false when it was never
// probed nor used.
func (n *Notifier) ChannelHealth(dest string) (Health, bool) { return n.health.get(dest) }

// Probe checks that the destination URL answers HTTP at all, with one HEAD request (no body,
// no redirect followed, bounded by the per-attempt timeout) and records the result. Any HTTP
// status counts as reachable: webhook receivers and Slack answer HEAD with 405 or 400, and the
// point is to catch a wrong host, a closed port or a TLS failure before an approval depends on
// it. Deliveries update the health afterwards.
func (n *Notifier) Probe(ctx context.Context, dest string) Health {
	u, err := url.Parse(dest)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		h := Health{Detail: "destination.url is not an absolute http(s) URL", At: time.Now()}
		n.health.set(dest, h)
		return h
	}
	h := Health{OK: true, Target: u.Scheme + "://" + u.Host, At: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u.String(), nil)
	if err == nil {
		req.Header.Set("User-Agent", "Tollgate-Notifier")
		var resp *http.Response
		if resp, err = n.client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
	}
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error's text holds the whole URL
		}
		h.OK, h.Detail = false, "unreachable: "+scrub(err.Error(), u)
	}
	n.health.set(dest, h)
	return h
}

// recordDelivery updates a destination's health from a notification's final outcome.
func (n *Notifier) recordDelivery(dest string, u *url.URL, attempts int, err error) {
	h := Health{OK: err == nil, Target: u.Scheme + "://" + u.Host, At: time.Now()}
	if err != nil {
		h.Detail = fmt.Sprintf("last notification failed after %d attempt(s): %s", attempts, scrub(err.Error(), u))
	}
	n.health.set(dest, h)
}
