package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// send builds the body for the destination and delivers it, counting the result.
func (n *Notifier) send(ctx context.Context, it item) {
	dest := it.wf.Destination.Type
	var body []byte
	var err error
	switch {
	case it.pin != nil && dest == config.DestinationSlack:
		body, err = pinSlackBody(it, n.opts.ConsoleURL)
	case it.pin != nil:
		body, err = pinWebhookBody(it, n.opts.ConsoleURL)
	case dest == config.DestinationSlack:
		body, err = slackBody(it, n.opts.ConsoleURL)
	default:
		body, err = webhookBody(it, n.opts.ConsoleURL)
	}
	log := n.log.With(append(it.logAttrs(), "destination", dest)...)
	if err != nil {
		n.met.count(dest, resultFailed)
		log.Warn("notification not sent: encoding failed", "error", err)
		return
	}
	u, err := url.Parse(it.wf.Destination.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		n.met.count(dest, resultFailed)
		log.Warn("notification not sent: destination.url is not an absolute http(s) URL") // never echo it
		return
	}
	log = log.With("target", u.Scheme+"://"+u.Host) // the path and query may hold the secret
	attempts, err := n.deliver(ctx, u, body, it.event)
	switch {
	case err == nil:
		n.met.count(dest, resultSent)
		n.recordDelivery(it.wf.Destination.URL, u, attempts, nil)
		log.Debug("notification sent", "attempts", attempts, "queued_for", time.Since(it.enqueued).String())
		if it.event == EventRequested && it.task != nil && n.opts.Remember != nil {
			rctx, cancel := context.WithTimeout(ctx, n.timeout)
			_, err := n.opts.Remember(rctx, it.task.ID, tasks.MessageRef{Kind: refKind, Channel: dest, ID: deliveryID(it.task)})
			cancel()
			if err != nil {
				log.Warn("delivered notification not recorded on its task; a restart may send it again", "error", err.Error())
			}
		}
	case ctx.Err() != nil:
		// shutting down: neither sent nor a destination failure
		log.Info("notification abandoned at shutdown", "attempts", attempts)
	default:
		n.met.count(dest, resultFailed)
		n.recordDelivery(it.wf.Destination.URL, u, attempts, err)
		log.Warn("notification failed", "attempts", attempts, "error", scrub(err.Error(), u))
	}
}

// statusError is a non-2xx answer.
type statusError struct {
	code       int
	retryAfter time.Duration
}

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d", e.code) }

// retryable: network errors, 429 and 5xx are worth another attempt; other answers are final.
func retryable(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.code == http.StatusTooManyRequests || se.code >= 500
	}
	return true
}

// deliver POSTs body up to maxAttempts times with backoff, each attempt bounded by the
// client timeout. It returns the attempts made and the last error.
func (n *Notifier) deliver(ctx context.Context, u *url.URL, body []byte, event string) (int, error) {
	var err error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if attempt > 1 {
			wait := n.backoff[min(attempt-2, len(n.backoff)-1)]
			var se *statusError
			if errors.As(err, &se) && se.retryAfter > wait {
				wait = min(se.retryAfter, n.maxRetryAfter)
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return attempt - 1, ctx.Err()
			case <-t.C:
			}
		}
		err = n.post(ctx, u, body, event)
		if err == nil {
			return attempt, nil
		}
		if ctx.Err() != nil {
			return attempt, ctx.Err()
		}
		if !retryable(err) {
			return attempt, err
		}
		n.log.Debug("notification attempt failed, retrying", "attempt", attempt,
			"target", u.Scheme+"://"+u.Host, "error", scrub(err.Error(), u))
	}
	return maxAttempts, err
}

func (n *Notifier) post(ctx context.Context, u *url.URL, body []byte, event string) error {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Tollgate-Notifier")
	req.Header.Set("X-Tollgate-Event", event)
	resp, err := n.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err // url.Error's text holds the whole URL
		}
		return err
	}
	// Drain a little so the connection can be reused; the answer itself is never logged.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	return &statusError{code: resp.StatusCode, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"))}
}

// parseRetryAfter reads delay-seconds or an HTTP date (RFC 9110 §10.2.3); 0 when absent or bad.
func parseRetryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(min(s, 3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// scrub removes the URL (and its path and query, which may carry the secret) from an error
// text, in case a transport error echoes it.
func scrub(msg string, u *url.URL) string {
	host := u.Scheme + "://" + u.Host
	if full := u.String(); full != host {
		msg = strings.ReplaceAll(msg, full, host)
	}
	if u.RawQuery != "" {
		msg = strings.ReplaceAll(msg, u.RawQuery, "…")
	}
	if p := u.EscapedPath(); p != "" && p != "/" {
		msg = strings.ReplaceAll(msg, p, "/…")
	}
	return msg
}
