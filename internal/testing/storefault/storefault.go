// Package storefault is a store for tests that fails on demand, as a
// store whose server is down would: the tests of failure policies (guard,
// httplimit) need one.
package storefault

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

// A Store is a memory store with a switch that makes Decide fail with
// sluice.ErrStore. It is safe for concurrent use, SetFail included.
type Store struct {
	*memory.Store
	fail atomic.Bool
}

// New returns a working Store, closed when the test ends.
func New(t testing.TB) *Store {
	t.Helper()
	s := &Store{Store: memory.New(memory.Config{})}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// SetFail makes every later Decide fail (v true) or work again (v false).
func (s *Store) SetFail(v bool) { s.fail.Store(v) }

// Decide decides r in the memory store, or fails with sluice.ErrStore
// while SetFail(true) holds.
func (s *Store) Decide(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
	if s.fail.Load() {
		return sluice.Decision{}, fmt.Errorf("%w: test store down", sluice.ErrStore)
	}
	return s.Store.Decide(ctx, r)
}
