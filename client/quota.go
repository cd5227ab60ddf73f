package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/wire"
)

// QuotaConfig configures a Quota: which bucket of the service's quota
// section it holds a share of, under which name, and what it checks per
// request while it holds none.
type QuotaConfig struct {
	// Domain and Bucket name the bucket, as the service's quota section
	// maps it to a rule: a domain, and the bucket id's entries (1 to 16,
	// each key and value non-empty). Required.
	Domain string
	Bucket map[string]string
	// Holder names this program among the holders of the bucket: unique
	// per process, the same at every report, 1 to 48 printable ASCII
	// bytes. Required.
	Holder string
	// Rule and Key are what a request is checked as, per request, while
	// the Quota holds no share (before its first answer, once its answer
	// expired): the bucket's rule, and its key as the service names it
	// (the bucket id's entries sorted, "name=api&tenant=acme"). Default
	// none: such requests get the Client's Config.Failure decision.
	Rule, Key string
}

// A Quota decides the requests of one bucket in this process, under the
// share of the bucket's rule that the service assigns it (the service
// divides the rule's limit among the holders that report the bucket, by
// their demand, as it does for Envoys over RLQS; see docs/service.md).
// Report tells the service what it decided and renews the share, every
// report interval (Run does it); Decide decides one request: locally
// while a share or a blanket rule is in force, with a token bucket of
// the share (Burst deep), else per request (QuotaConfig.Rule).
//
// Create Quotas with Client.Quota; the zero value is not usable. A Quota
// is safe for concurrent use.
type Quota struct {
	c   *Client
	cfg QuotaConfig

	mu sync.Mutex
	// The answer in force, until expires (zero: none yet).
	expires time.Time
	blanket string       // "allow", "deny", or "" for a share
	limit   sluice.Limit // the rule's limit
	share   wire.QuotaResponse
	perSec  float64 // the share's refill, tokens a second
	tokens  float64
	at      time.Time // of tokens
	// Counted since the previous report, which was at reported.
	allowed, denied, checked uint64
	reported                 time.Time
}

// Quota returns a Quota of the bucket cfg names, on the service's HTTP
// API. It holds no share until its first Report.
func (c *Client) Quota(cfg QuotaConfig) (*Quota, error) {
	switch {
	case c.base == "":
		return nil, fmt.Errorf("client: quota: %w: no URL of the HTTP API", ErrUnsupported)
	case cfg.Domain == "" || len(cfg.Bucket) == 0 || cfg.Holder == "":
		return nil, fmt.Errorf("client: quota: %w: Domain, Bucket and Holder are required", sluice.ErrInvalidRequest)
	case (cfg.Rule == "") != (cfg.Key == ""):
		return nil, fmt.Errorf("client: quota: %w: give both Rule and Key, or neither", sluice.ErrInvalidRequest)
	}
	return &Quota{c: c, cfg: cfg}, nil
}

// Decide decides one request at now: locally under the answer in force
// (no call to the service), else per request by CheckN of the
// configured Rule and Key, else by the Client's Config.Failure with an
// error wrapping ErrUnavailable.
func (q *Quota) Decide(ctx context.Context, now time.Time) (sluice.Decision, error) {
	if d, ok := q.local(now); ok {
		return d, nil
	}
	return q.fallback(ctx)
}

// local decides at now under the answer in force, and reports false when
// none is.
func (q *Quota) local(now time.Time) (sluice.Decision, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !now.Before(q.expires) {
		return sluice.Decision{}, false
	}
	d := sluice.Decision{Limit: q.limit, Time: now}
	switch q.blanket {
	case "allow":
		d.Allowed = true
	case "deny":
		d.RetryAfter = q.expires.Sub(now)
	default:
		q.take(&d, now)
	}
	if d.Allowed {
		q.allowed++
	} else {
		q.denied++
	}
	return d, true
}

// take decides d at now from the token bucket of the share; q.mu is held.
func (q *Quota) take(d *sluice.Decision, now time.Time) {
	if el := now.Sub(q.at); el > 0 {
		q.tokens = min(float64(q.share.Burst), q.tokens+el.Seconds()*q.perSec)
		q.at = now
	}
	if q.tokens >= 1 {
		q.tokens--
		d.Allowed, d.Remaining = true, int(q.tokens)
		return
	}
	d.RetryAfter = time.Duration((1 - q.tokens) / q.perSec * float64(time.Second))
}

// fallback decides one request without a share: per request, or by the
// failure policy.
func (q *Quota) fallback(ctx context.Context) (sluice.Decision, error) {
	if q.cfg.Rule == "" {
		err := q.c.unavailable(fmt.Errorf("quota: no share of %s", q.cfg.Domain))
		return q.c.failed(err), err
	}
	d, err := q.c.CheckN(ctx, q.cfg.Rule, q.cfg.Key, 1)
	q.mu.Lock()
	q.checked++
	q.mu.Unlock()
	return d, err
}

// Report tells the service what the Quota decided since its previous
// report, at now, and applies the answer: a new share, or a blanket
// rule, until the answer's TTL. On an error the counts are kept for the
// next report, and the answer in force holds until it expires.
func (q *Quota) Report(ctx context.Context, now time.Time) error {
	req := q.drain(now)
	resp, err := post[wire.QuotaResponse](ctx, q.c, "/v1/quota", q.cfg.Domain, q.cfg.Holder, req)
	if err != nil {
		q.undrain(req)
		return err
	}
	q.apply(resp, now)
	return nil
}

// drain returns the report of the counts since the previous report, and
// starts the next.
func (q *Quota) drain(now time.Time) wire.QuotaRequest {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := wire.QuotaRequest{Domain: q.cfg.Domain, Bucket: q.cfg.Bucket, Holder: q.cfg.Holder,
		Allowed: q.allowed, Denied: q.denied, Checked: q.checked}
	if !q.reported.IsZero() {
		r.Elapsed = min(max(now.Sub(q.reported).Seconds(), 0), 3600)
	}
	q.allowed, q.denied, q.checked, q.reported = 0, 0, 0, now
	return r
}

// undrain adds the counts of a report that failed back to the next.
func (q *Quota) undrain(r wire.QuotaRequest) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.allowed += r.Allowed
	q.denied += r.Denied
	q.checked += r.Checked
}

// apply puts the answer r, received at now, in force. A share that did
// not change keeps its token bucket; a new one starts full when the
// Quota had none, and keeps the tokens it had (at most its new depth)
// when it replaces another, so that a change of shares hands out no
// fresh burst.
func (q *Quota) apply(r wire.QuotaResponse, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	had := now.Before(q.expires) && q.blanket == ""
	q.expires = now.Add(time.Duration(r.TTL * float64(time.Second)))
	q.limit = sluice.Limit{Rate: r.Limit, Period: time.Duration(r.Period * float64(time.Second))}
	q.blanket = r.Blanket
	if r.Blanket != "" || r.Rate <= 0 || r.Period <= 0 {
		q.blanket = cmpOr(r.Blanket, "deny")
		return
	}
	if !had {
		q.tokens = float64(r.Burst)
	}
	q.share, q.perSec, q.at = r, float64(r.Rate)/r.Period, now
	q.tokens = min(q.tokens, float64(r.Burst))
}

// Release gives the Quota's share back to the service at once (instead
// of at its TTL): for a program that stops deciding under the bucket.
// The Quota then holds no share.
func (q *Quota) Release(ctx context.Context) error {
	req := wire.QuotaRequest{Domain: q.cfg.Domain, Bucket: q.cfg.Bucket, Holder: q.cfg.Holder, Release: true}
	_, err := post[wire.QuotaResponse](ctx, q.c, "/v1/quota", q.cfg.Domain, q.cfg.Holder, req)
	q.mu.Lock()
	q.expires = time.Time{}
	q.mu.Unlock()
	return err
}

// Run reports every interval (the service's quota.report_interval)
// until ctx ends, by the wall clock, and then releases the share. Report
// errors are counted in the Client's Stats and otherwise ignored: the
// share in force holds until its TTL, then requests fall back.
func (q *Quota) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.c.cfg.Timeout)
			defer cancel()
			_ = q.Release(rctx)
			return
		case now := <-t.C:
			_ = q.Report(ctx, now)
		}
	}
}
