package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/wire"
)

// Check takes one unit from key under the named rule of the service, and
// reports whether key may act now. Over the limit is a Decision with
// Allowed false, not an error. A denial the cache holds is answered
// without a round trip.
//
// The error wraps ErrUnavailable when the service did not decide; the
// Decision is then the failure policy's (allowed under sluice.FailOpen,
// denied under FailClosed), so that a caller may act on it and log the error.
// A request the service refuses (an unknown rule, a cost above the
// rule's burst) is an error wrapping sluice.ErrInvalidRequest, with a
// zero (denying) Decision.
func (c *Client) Check(ctx context.Context, rule, key string) (sluice.Decision, error) {
	return c.check(ctx, wire.CheckRequest{Rule: rule, Key: key})
}

// CheckN is Check for a cost of n units.
func (c *Client) CheckN(ctx context.Context, rule, key string, n int) (sluice.Decision, error) {
	if n < 1 {
		return sluice.Decision{}, fmt.Errorf("client: %w: cost %d must be at least 1", sluice.ErrInvalidRequest, n)
	}
	return c.check(ctx, wire.CheckRequest{Rule: rule, Key: key, Cost: n})
}

// Peek reports whether key may act once now under the named rule,
// taking nothing. Its errors are those of Check. Over gRPC, a denied
// peek has no RetryAfter unless the cache answered it: Envoy's API
// tells what is left, not when more will be.
func (c *Client) Peek(ctx context.Context, rule, key string) (sluice.Decision, error) {
	return c.check(ctx, wire.CheckRequest{Rule: rule, Key: key, Peek: true})
}

// Reset forgets key's state under every limit of the named rule, in the
// service and in the client's denial cache (denials that other clients
// cached stay until they expire). It needs Config.URL: Envoy's API has
// no reset.
func (c *Client) Reset(ctx context.Context, rule, key string) error {
	if c.base == "" {
		return fmt.Errorf("client: reset: %w: no URL of the HTTP API", ErrUnsupported)
	}
	if rule == "" || key == "" {
		return fmt.Errorf("client: %w: rule and key are required", sluice.ErrInvalidRequest)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	err := c.call(ctx, http.MethodPost, c.base+"/v1/reset", "", wire.ResetRequest{Rule: rule, Key: key}, nil, http.StatusNoContent)
	if err == nil && c.cache != nil {
		c.cache.remove(cacheKey(rule, key))
	}
	return err
}

// check decides one check: from the cache, or by a round trip.
func (c *Client) check(ctx context.Context, req wire.CheckRequest) (sluice.Decision, error) {
	if err := validate(req); err != nil {
		return sluice.Decision{}, err
	}
	ck := cacheKey(req.Rule, req.Key)
	if d, ok := c.cached(ck, max(req.Cost, 1)); ok {
		return d, nil
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	sent := c.cfg.Clock()
	d, err := c.send(ctx, req)
	if err != nil {
		return c.failed(err), err
	}
	d.Time = sent
	c.remember(ck, req, d)
	return d, nil
}

// send asks the service about one check, over gRPC when configured.
func (c *Client) send(ctx context.Context, req wire.CheckRequest) (sluice.Decision, error) {
	if c.rls != nil {
		return c.checkGRPC(ctx, req)
	}
	var resp wire.CheckResponse
	if err := c.call(ctx, http.MethodPost, c.base+"/v1/check", "", req, &resp, http.StatusOK); err != nil {
		return sluice.Decision{}, err
	}
	return decision(resp), nil
}

// validate checks what the client needs of a check: a named rule and a
// key (the cache is keyed by them), and a cost of at least 0.
func validate(req wire.CheckRequest) error {
	switch {
	case req.Domain != "" || req.Descriptors != nil:
		return fmt.Errorf("client: %w: descriptor checks are not supported: give a rule and a key", sluice.ErrInvalidRequest)
	case req.Rule == "" || req.Key == "":
		return fmt.Errorf("client: %w: rule and key are required", sluice.ErrInvalidRequest)
	case req.Cost < 0:
		return fmt.Errorf("client: %w: cost %d must be at least 1", sluice.ErrInvalidRequest, req.Cost)
	}
	return nil
}

// decision reads the service's answer as a sluice.Decision. The limit
// is the binding limit's policy as sluice.ParseLimit reads it (or just
// its rate, if it does not parse).
func decision(r wire.CheckResponse) sluice.Decision {
	d := sluice.Decision{
		Allowed:    r.Allowed,
		Remaining:  r.Remaining,
		ResetAfter: seconds(r.ResetAfter),
		RetryAfter: seconds(r.RetryAfter),
	}
	d.Limit.Rate = r.Limit
	if l, err := sluice.ParseLimit(r.Policy); err == nil {
		d.Limit = l
	}
	return d
}

// seconds converts the API's seconds to a duration.
func seconds(s float64) time.Duration {
	if s <= 0 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// cached answers a check of cost from the denial cache, counting a hit.
func (c *Client) cached(ck string, cost int) (sluice.Decision, bool) {
	if c.cache == nil {
		return sluice.Decision{}, false
	}
	now := c.cfg.Clock()
	e, ok := c.cache.get(ck, cost, now)
	if !ok {
		return sluice.Decision{}, false
	}
	c.hits.Add(1)
	retry := e.retry.Sub(now)
	return sluice.Decision{Limit: e.limit, RetryAfter: retry, ResetAfter: max(e.reset.Sub(now), retry), Time: now}, true
}

// remember caches a denial that says when the key may pass: a denial
// by the deny list, without a wait, is asked again each time. The wait
// comes rounded up, to the millisecond (over HTTP, and in sluice serve's
// gRPC metadata), or to the second (the Retry-After field of another
// server of Envoy's API), so the true wait is up to one unit less: the
// denial is cached for that, and the cache never denies a check that the
// service would allow. A whole number of seconds over gRPC may be either,
// and is taken as seconds.
func (c *Client) remember(ck string, req wire.CheckRequest, d sluice.Decision) {
	unit := time.Millisecond
	if c.rls != nil && d.RetryAfter%time.Second == 0 {
		unit = time.Second
	}
	if c.cache == nil || d.Allowed || d.RetryAfter <= unit {
		return
	}
	c.cache.put(ck, denial{cost: max(req.Cost, 1), limit: d.Limit, until: d.Time.Add(d.RetryAfter - unit), retry: d.Time.Add(d.RetryAfter), reset: d.Time.Add(d.ResetAfter)}, d.Time)
}

// A Result answers one check of CheckMany.
type Result struct {
	// Decision is the check's decision; with Err, as Check returns it.
	Decision sluice.Decision
	// Err is the check's error, as Check returns it: a check the
	// service refused, or ErrUnavailable.
	Err error
}

// CheckMany decides checks (each a Rule and a Key, with their Cost and
// Peek) as Check does, each on its own and in order, and returns one
// Result per check. Cached denials are answered from the cache; the
// others go to the service in batches of wire.MaxBatch over
// HTTP (one round trip each), or one call each over gRPC, which has no
// batches. The error wraps ErrUnavailable when a round trip failed (its
// checks' Results carry it, with the failure policy's Decision); a
// check the service refused is only in its Result.
func (c *Client) CheckMany(ctx context.Context, checks []wire.CheckRequest) ([]Result, error) {
	out := make([]Result, len(checks))
	var pending []int // indices of the checks to send
	for i, req := range checks {
		if err := validate(req); err != nil {
			out[i].Err = err
		} else if d, ok := c.cached(cacheKey(req.Rule, req.Key), max(req.Cost, 1)); ok {
			out[i].Decision = d
		} else {
			pending = append(pending, i)
		}
	}
	var errs []error
	for len(pending) > 0 {
		n := min(len(pending), wire.MaxBatch)
		if c.rls != nil {
			n = 1
		}
		if err := c.sendMany(ctx, checks, pending[:n], out); err != nil {
			errs = append(errs, err)
		}
		pending = pending[n:]
	}
	return out, errors.Join(errs...)
}

// sendMany sends the checks at indices idx in one round trip, and fills
// their Results.
func (c *Client) sendMany(ctx context.Context, checks []wire.CheckRequest, idx []int, out []Result) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	sent := c.cfg.Clock()
	ds, errs, err := c.batch(ctx, checks, idx)
	for j, i := range idx {
		switch {
		case err != nil:
			out[i] = Result{Decision: c.failed(err), Err: err}
		case errs[j] != nil:
			out[i].Err = errs[j]
		default:
			ds[j].Time = sent
			out[i].Decision = ds[j]
			c.remember(cacheKey(checks[i].Rule, checks[i].Key), checks[i], ds[j])
		}
	}
	if err != nil && errors.Is(err, ErrUnavailable) {
		return err
	}
	return nil
}

// batch asks the service about the checks at indices idx: with one
// batch request over HTTP, or with one call over gRPC (idx then holds
// one index). err is the round trip's; errs[j] that of check idx[j].
func (c *Client) batch(ctx context.Context, checks []wire.CheckRequest, idx []int) (ds []sluice.Decision, errs []error, err error) {
	ds, errs = make([]sluice.Decision, len(idx)), make([]error, len(idx))
	if c.rls != nil {
		ds[0], err = c.checkGRPC(ctx, checks[idx[0]])
		if err != nil && !errors.Is(err, ErrUnavailable) {
			errs[0], err = err, nil
		}
		return ds, errs, err
	}
	body := wire.BatchRequest{Checks: make([]wire.CheckRequest, len(idx))}
	for j, i := range idx {
		body.Checks[j] = checks[i]
	}
	var resp wire.BatchResponse
	if err := c.call(ctx, http.MethodPost, c.base+"/v1/check", "", body, &resp, http.StatusOK); err != nil {
		return ds, errs, err
	}
	if len(resp.Results) != len(idx) {
		return ds, errs, c.unavailable(fmt.Errorf("%d answers to a batch of %d checks", len(resp.Results), len(idx)))
	}
	for j, r := range resp.Results {
		if r.Error != "" {
			errs[j] = fmt.Errorf("client: %w: %s", sluice.ErrInvalidRequest, r.Error)
			continue
		}
		ds[j] = decision(r)
	}
	return ds, errs, nil
}
