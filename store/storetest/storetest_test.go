package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// modelStore is the suite's own reference made into a Store: a map under
// one mutex. It checks that the suite passes against a store that is right
// by construction.
type modelStore struct {
	mu  sync.Mutex
	ref reference
}

func (m *modelStore) Decide(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
	if err := r.Validate(); err != nil {
		return sluice.Decision{}, err
	}
	if r.Now.IsZero() {
		r.Now = time.Now()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.ref.apply(r)
	d.Time = r.Now
	return d, nil
}

func TestRunModel(t *testing.T) {
	Run(t, func(t *testing.T) sluice.Store {
		return &modelStore{ref: reference{states: map[stateKey][]int64{}}}
	})
}

// DecideBatch decides rs one after another, as a batching store must.
func (m *modelStore) DecideBatch(ctx context.Context, rs []sluice.Request) ([]sluice.Decision, []error) {
	ds, errs := make([]sluice.Decision, len(rs)), make([]error, len(rs))
	for i, r := range rs {
		ds[i], errs[i] = m.Decide(ctx, r)
	}
	return ds, errs
}

func TestRunBatchModel(t *testing.T) {
	RunBatch(t, func(t *testing.T) BatchStore {
		return &modelStore{ref: reference{states: map[stateKey][]int64{}}}
	})
}
