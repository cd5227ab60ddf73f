package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The headers of a webhook's request.
const (
	// HeaderTimestamp carries the Unix time, in seconds, the request was
	// signed at.
	HeaderTimestamp = "X-Sluice-Timestamp"
	// HeaderSignature carries "v1=" and the hex HMAC-SHA256, keyed with
	// the webhook's secret, of the timestamp, a '.', and the body.
	HeaderSignature = "X-Sluice-Signature"
	// HeaderEvent carries the event's kind; HeaderID its ID.
	HeaderEvent = "X-Sluice-Event"
	HeaderID    = "X-Sluice-Event-Id"
)

// DefaultTolerance is how far from now Verify accepts a timestamp when
// given no tolerance: a replay later than that is refused.
const DefaultTolerance = 5 * time.Minute

// maxResponse bounds what a webhook reads of a receiver's answer.
const maxResponse = 64 << 10

// ErrSignature means a request's signature does not verify: missing,
// malformed, wrong, or too old.
var ErrSignature = errors.New("notify: bad signature")

// A Webhook posts each event, as JSON, to a URL, signed with a shared
// secret (see Sign and Verify). A 2xx answer delivers it; 408, 429, any
// 5xx, a redirect or a network error is retried by its Sink; another 4xx
// is final. Redirects are not followed. Create Webhooks with NewWebhook;
// a Webhook is safe for concurrent use.
type Webhook struct {
	url    string
	secret []byte
	client *http.Client
	clock  func() time.Time
}

// WebhookConfig configures a Webhook.
type WebhookConfig struct {
	// URL receives the events: http or https, with a host. Required.
	URL string
	// Secret keys the signatures. Required.
	Secret string
	// Client sends the requests; the Sink's Timeout bounds each. Default
	// a client of its own that follows no redirect.
	Client *http.Client
	// Clock returns the time requests are signed at. Default time.Now.
	Clock func() time.Time
}

// NewWebhook returns the Webhook of c. The error says what is wrong with
// the URL or the secret.
func NewWebhook(c WebhookConfig) (*Webhook, error) {
	if err := CheckURL(c.URL); err != nil {
		return nil, err
	}
	if c.Secret == "" {
		return nil, errors.New("notify: a webhook needs a secret to sign with")
	}
	w := &Webhook{url: c.URL, secret: []byte(c.Secret), client: c.Client, clock: c.Clock}
	if w.client == nil {
		w.client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if w.clock == nil {
		w.clock = time.Now
	}
	return w, nil
}

// CheckURL reports what is wrong with u as a webhook's URL: it must be
// absolute, http or https, with a host, and no user information (a
// secret in a URL ends up in logs).
func CheckURL(u string) error {
	p, err := url.Parse(u)
	switch {
	case err != nil:
		return fmt.Errorf("notify: url %q: %w", u, err)
	case p.Scheme != "http" && p.Scheme != "https":
		return fmt.Errorf("notify: url %q: want an http or https URL", u)
	case p.Host == "" || p.Hostname() == "":
		return fmt.Errorf("notify: url %q has no host", u)
	case p.User != nil:
		return fmt.Errorf("notify: url %q holds a user or password: use the secret to authenticate", u)
	}
	return nil
}

// Deliver posts e once.
func (w *Webhook) Deliver(ctx context.Context, e Event) error {
	body, err := json.Marshal(e)
	if err != nil {
		return Permanent(fmt.Errorf("notify: %w", err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return Permanent(fmt.Errorf("notify: %w", err))
	}
	ts := w.clock()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "sluice-webhook/1")
	req.Header.Set(HeaderEvent, string(e.Kind))
	req.Header.Set(HeaderID, e.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(HeaderSignature, Sign(w.secret, ts, body))
	resp, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("notify: post: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse)) // lets the connection be reused
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return nil
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 300 && c < 400 || c >= 500:
		return fmt.Errorf("notify: post: %s", resp.Status)
	default:
		return Permanent(fmt.Errorf("notify: post: %s (not retried)", resp.Status))
	}
}

// Sign returns the value of HeaderSignature for body signed at ts:
// "v1=" and the hex HMAC-SHA256, keyed with secret, of the Unix seconds
// of ts in decimal, a '.', and body.
func Sign(secret []byte, ts time.Time, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strconv.FormatInt(ts.Unix(), 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a webhook request's signature, for receivers written in
// Go: the timestamp and signature headers of h against body, with the
// secret; a timestamp further than tolerance from now (0:
// DefaultTolerance) is refused, so that a request captured once cannot
// be replayed later. The error wraps ErrSignature.
func Verify(secret []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	sec, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: no valid %s", ErrSignature, HeaderTimestamp)
	}
	ts := time.Unix(sec, 0)
	if d := now.Sub(ts); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp %v is more than %v from now", ErrSignature, ts.UTC(), tolerance)
	}
	got, ok := strings.CutPrefix(h.Get(HeaderSignature), "v1=")
	mac, err := hex.DecodeString(got)
	want, _ := hex.DecodeString(strings.TrimPrefix(Sign(secret, ts, body), "v1="))
	if !ok || err != nil || !hmac.Equal(mac, want) {
		return fmt.Errorf("%w: %s does not match the body", ErrSignature, HeaderSignature)
	}
	return nil
}
