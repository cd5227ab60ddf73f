package leasetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

// overAdmitting is a LeaseStore that ignores the ceiling: a broken store
// the observer must catch. It is seen as a LeaseStore only (not the
// memory store's LeaseRefs, whose acquires it does not break).
type overAdmitting struct{ sluice.LeaseStore }

func (s overAdmitting) Acquire(ctx context.Context, r sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	r.Limit, r.Ceiling = sluice.MaxLeases, 0
	return s.LeaseStore.Acquire(ctx, r)
}

// TestObserverCatchesOverAdmission runs holders in this process on a
// correct store and on one that over-admits: the observer counts at most
// the limit on the first and more on the second.
func TestObserverCatchesOverAdmission(t *testing.T) {
	for _, tt := range []struct {
		name  string
		wrap  func(*memory.Store) sluice.LeaseStore
		above bool
	}{
		{"correct", func(s *memory.Store) sluice.LeaseStore { return s }, false},
		{"over-admitting", func(s *memory.Store) sluice.LeaseStore { return overAdmitting{s} }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := NewObserver(t)
			st := memory.New(memory.Config{})
			defer st.Close()
			p := Params{Addr: o.Addr(), Limit: 4, Goroutines: 32, Rounds: 3, TTL: time.Minute}
			c, err := sluice.NewConcurrency(tt.wrap(st), sluice.ConcurrencyConfig{Limit: p.Limit, TTL: p.TTL, Poll: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for range p.Goroutines {
				wg.Go(func() {
					if err := hold(c, p); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			_, most, granted := o.Counts()
			if granted != p.Goroutines*p.Rounds || (most > p.Limit) != tt.above {
				t.Errorf("granted %d, at most %d held at once (limit %d); want %d granted, above the limit: %v",
					granted, most, p.Limit, p.Goroutines*p.Rounds, tt.above)
			}
		})
	}
}
