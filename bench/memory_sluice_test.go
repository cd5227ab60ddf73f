package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

// sluiceImpl is the sluice memory store deciding one limit of algorithm a.
func sluiceImpl(a sluice.Algorithm) memImpl {
	return memImpl{
		name:       "sluice-" + a.String(),
		clock:      "the memory store's clock (Request.Now left zero)",
		injectable: true,
		model:      a.String(),
		new: func(l memLimit, now func() time.Time) (memTaker, error) {
			lim := sluiceLimit(l, a)
			if err := lim.Validate(); err != nil {
				return nil, err
			}
			return &sluiceTaker{store: memory.New(memory.Config{}), limits: []sluice.Limit{lim}, now: now}, nil
		},
		fits: func(l memLimit, keys int) string {
			lim := sluiceLimit(l, a)
			if err := lim.Validate(); err != nil {
				return err.Error()
			}
			// The sliding log keeps one timestamp per admitted event.
			if a == sluice.SlidingLog && keys > 1 && lim.Rate > 10 {
				return fmt.Sprintf("a sliding log of %d keeps %d bytes per key", lim.Rate, 8*(lim.Rate+1))
			}
			return ""
		},
	}
}

func sluiceLimit(l memLimit, a sluice.Algorithm) sluice.Limit {
	lim := sluice.Limit{Rate: l.Rate, Period: l.Period, Algorithm: a}
	if a == sluice.GCRA && l.Burst != l.Rate {
		lim.Burst = l.Burst
	}
	return lim
}

// sluiceTaker asks the sluice memory store, as a Limiter would, without
// the Limiter's key bounding.
type sluiceTaker struct {
	store  *memory.Store
	limits []sluice.Limit
	now    func() time.Time
}

func (s *sluiceTaker) take(ctx context.Context, key string) (bool, error) {
	r := sluice.Request{Prefix: "bench:", Key: key, Limits: s.limits, Cost: 1}
	if s.now != nil {
		r.Now = s.now()
	}
	d, err := s.store.Decide(ctx, r)
	return d.Allowed, err
}

func (s *sluiceTaker) close() { _ = s.store.Close() }
