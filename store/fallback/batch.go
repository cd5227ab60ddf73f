package fallback

import (
	"context"
	"time"

	"github.com/sluicehq/sluice"
)

// DecideBatch decides many requests, for any keys, as Decide decides each
// of them: ds[i], errs[i] answer rs[i]. The requests it sends to the
// primary go in one call of the primary's own DecideBatch (store/redis:
// one round trip) under one Timeout; a primary without DecideBatch gets
// one Decide each, as from Decide.
//
// The policy applies per request, as in Decide: the deny cache answers
// the actors it knows to be denied, refunds of local takes not yet
// replayed stay local, and each request the primary fails is counted,
// reported to OnError and answered by the policy (and journaled, under
// FailLocal). The breaker admits or refuses the batch as a whole, and each
// answer of the primary tells it, in order, as consecutive calls would.
// Since the requests of a batch reach the primary together, the deny
// cache and a breaker that opens act from the next batch on: a batch of
// requests that all fail counts each failure.
func (s *Store) DecideBatch(ctx context.Context, rs []sluice.Request) ([]sluice.Decision, []error) {
	b, ok := s.c.Primary.(sluice.Batcher)
	if !ok {
		ds, errs := make([]sluice.Decision, len(rs)), make([]error, len(rs))
		for i, r := range rs {
			ds[i], errs[i] = s.Decide(ctx, r)
		}
		return ds, errs
	}
	ds, errs := make([]sluice.Decision, len(rs)), make([]error, len(rs))
	nows := make([]time.Time, len(rs))
	send := make([]int, 0, len(rs)) // the requests for the primary
	for i := range rs {
		r := &rs[i]
		if errs[i] = r.Validate(); errs[i] != nil {
			continue
		}
		nows[i] = s.now(r)
		var done bool
		if ds[i], done, errs[i] = s.early(ctx, r, nows[i]); !done {
			send = append(send, i)
		}
	}
	if len(send) == 0 {
		return ds, errs
	}
	call, probe := s.admit(nows[send[0]])
	if !call {
		for _, i := range send {
			ds[i], errs[i] = s.degrade(ctx, rs[i], nows[i])
		}
		return ds, errs
	}
	reqs := make([]sluice.Request, len(send))
	for k, i := range send {
		reqs[k] = rs[i]
	}
	cctx, cancel := s.withTimeout(ctx)
	defer cancel()
	got, gerrs := b.DecideBatch(cctx, reqs)
	for k, i := range send {
		// The first answer ends the probe; the others tell the breaker
		// as the calls after a probe would.
		ds[i], errs[i] = s.settle(ctx, rs[i], nows[i], got[k], gerrs[k], probe && k == 0)
	}
	return ds, errs
}
