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
		clock:      "the memory store's default clock (Limiter.Clock nil): a monotonic reading refreshed every 1 ms",
		injectable: true,
		model:      a.String(),
		new: func(l memLimit, now func() time.Time) (memTaker, error) {
			lim := sluiceLimit(l, a)
			if err := lim.Validate(); err != nil {
				return nil, err
			}
			store := memory.New(memory.Config{})
			limiter, err := sluice.New(store, sluice.Config{Limits: []sluice.Limit{lim}, Action: "bench", Clock: now})
			if err != nil {
				return nil, err
			}
			return &sluiceTaker{store: store, lim: limiter}, nil
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

// sluiceAdmitImpl is sluiceImpl(GCRA) asked through Limiter.Admit, the
// API of a caller that needs a yes or no alone, as every peer and the
// floor answer.
func sluiceAdmitImpl() memImpl {
	impl := sluiceImpl(sluice.GCRA)
	impl.name += "-admit"
	newGCRA := impl.new
	impl.new = func(l memLimit, now func() time.Time) (memTaker, error) {
		t, err := newGCRA(l, now)
		if err != nil {
			return nil, err
		}
		return &sluiceAdmitTaker{*t.(*sluiceTaker)}, nil
	}
	return impl
}

func sluiceLimit(l memLimit, a sluice.Algorithm) sluice.Limit {
	lim := sluice.Limit{Rate: l.Rate, Period: l.Period, Algorithm: a}
	if a == sluice.GCRA && l.Burst != l.Rate {
		lim.Burst = l.Burst
	}
	return lim
}

// sluiceTaker asks the sluice memory store through sluice.Limiter, the API
// an application calls.
type sluiceTaker struct {
	store *memory.Store
	lim   *sluice.Limiter
}

func (s *sluiceTaker) take(ctx context.Context, key string) (bool, error) {
	d, err := s.lim.Allow(ctx, key)
	return d.Allowed, err
}

func (s *sluiceTaker) close() { _ = s.store.Close() }

// sluiceAdmitTaker asks through sluice.Limiter.Admit: a yes or no alone.
type sluiceAdmitTaker struct{ sluiceTaker }

func (s *sluiceAdmitTaker) take(ctx context.Context, key string) (bool, error) {
	return s.lim.Admit(ctx, key)
}
