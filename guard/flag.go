package guard

import (
	"context"
	"time"

	"github.com/sluicehq/sluice"
)

// flagResolution is the granularity of a flag's remaining time.
const flagResolution = time.Second

// A flag marks keys in a sluice Store for a while: a ban, a known-good
// address, a notification already sent. It needs nothing of a store but
// Decide, so every store (and every process sharing one) sees it.
//
// It is a GCRA limit that refills one token a second with a bucket as deep
// as sluice.MaxPeriod, the same for every flag so that processes
// configured differently share the state: setting a flag for d takes ⌈d⌉ seconds of tokens
// from an empty bucket, and a peek for the whole bucket is denied exactly
// while any of them is missing, with RetryAfter the time left. When the
// flag lapses the state is back to empty, so stores forget it.
type flag struct {
	lim   *sluice.Limiter
	depth int // seconds: the longest flag
}

// newFlag returns the flag of action. A privilege flag (one that lets an
// actor through, see sluice.Config.SafeToForget) is never set by a store
// that forgot other keys' states; another flag may be, which must then
// hold an actor back, never let it through.
func newFlag(store sluice.Store, namespace, action string, clock func() time.Time, privilege bool) (*flag, error) {
	depth := int(sluice.MaxPeriod / flagResolution)
	l := sluice.Limit{Rate: depth, Period: time.Duration(depth) * flagResolution}
	lim, err := sluice.New(store, sluice.Config{Limits: []sluice.Limit{l}, Action: action, Namespace: namespace, Clock: clock, SafeToForget: privilege})
	if err != nil {
		return nil, err
	}
	return &flag{lim: lim, depth: depth}, nil
}

// set flags key for d (at most sluice.MaxPeriod, at least a second),
// replacing any flag it had.
func (f *flag) set(ctx context.Context, key string, d time.Duration) error {
	_, err := f.setEnd(ctx, key, d)
	return err
}

// setEnd is set, and returns when the flag lapses by the store's clock:
// d rounded up to whole seconds after the store's time of the set.
func (f *flag) setEnd(ctx context.Context, key string, d time.Duration) (time.Time, error) {
	if err := f.lim.Reset(ctx, key); err != nil {
		return time.Time{}, err
	}
	n := int(min(max((d+flagResolution-1)/flagResolution, 1), time.Duration(f.depth)))
	dec, err := f.lim.AllowN(ctx, key, n)
	if err != nil {
		return time.Time{}, err
	}
	return dec.Time.Add(time.Duration(n) * flagResolution), nil
}

// end reports whether key is flagged, and when the flag lapses by the
// store's clock: the decision's time plus the time left, exactly (a
// GCRA state is its end).
func (f *flag) end(ctx context.Context, key string) (time.Time, bool, error) {
	d, err := f.lim.PeekN(ctx, key, f.depth)
	if err != nil || d.Allowed {
		return time.Time{}, false, err
	}
	return d.Time.Add(d.RetryAfter), true, nil
}

// get reports whether key is flagged, and for how much longer.
func (f *flag) get(ctx context.Context, key string) (time.Duration, bool, error) {
	d, err := f.lim.PeekN(ctx, key, f.depth)
	if err != nil || d.Allowed {
		return 0, false, err
	}
	return d.RetryAfter, true, nil
}
