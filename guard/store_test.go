package guard_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// testStore is a stopgap until store/memory lands: a mutex-guarded map
// applying the reference algorithms. It also fails on demand.
type testStore struct {
	mu     sync.Mutex
	states map[string][]int64
	fail   bool
}

func newStore(t *testing.T) *testStore {
	t.Helper()
	return &testStore{states: map[string][]int64{}}
}

func (s *testStore) setFail(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = v
}

func (s *testStore) Decide(_ context.Context, r sluice.Request) (sluice.Decision, error) {
	if err := r.Validate(); err != nil {
		return sluice.Decision{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return sluice.Decision{}, fmt.Errorf("%w: test store down", sluice.ErrStore)
	}
	now := r.Now
	if now.IsZero() {
		now = time.Now()
	}
	states := make([][]int64, len(r.Limits))
	for i, l := range r.Limits {
		k := fmt.Sprintf("%s%s|%d", r.Prefix, r.Key, l.StateID())
		if s.states[k] == nil || r.Op == sluice.OpReset {
			s.states[k] = make([]int64, algorithm.Words(l))
		}
		states[i] = s.states[k]
	}
	switch r.Op {
	case sluice.OpReset:
		return sluice.Decision{Allowed: true, Limit: r.Limits[0], Time: now}, nil
	case sluice.OpRefund:
		algorithm.RefundAll(r.Limits, states, r.Key, r.At.UnixNano(), now.UnixNano(), r.Cost)
		return sluice.Decision{Allowed: true, Limit: r.Limits[0], Time: now}, nil
	}
	d := algorithm.Decide(r.Limits, states, r.Key, now.UnixNano(), r.Cost, r.Op == sluice.OpTake)
	d.Time = now
	return d, nil
}

// newExampleStore is the store of the examples, which have no *testing.T.
func newExampleStore() *testStore { return &testStore{states: map[string][]int64{}} }
