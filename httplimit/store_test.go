package httplimit_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

// testStore is the embedded memory store, with a switch that makes it
// fail as a store whose server is down would: the tests of failure
// policies need a store that fails on demand.
type testStore struct {
	*memory.Store
	fail atomic.Bool
}

func newStore(t *testing.T) *testStore {
	t.Helper()
	s := &testStore{Store: memory.New(memory.Config{})}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (s *testStore) setFail(v bool) { s.fail.Store(v) }

func (s *testStore) Decide(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
	if s.fail.Load() {
		return sluice.Decision{}, fmt.Errorf("%w: test store down", sluice.ErrStore)
	}
	return s.Store.Decide(ctx, r)
}

// newExampleStore is the store of the examples, which have no *testing.T
// and end with the process.
func newExampleStore() *memory.Store { return memory.New(memory.Config{}) }
