package server

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestMeterBinds holds a meter's Bound to the stores' conformance suite,
// as the memory store's own Bound is held: a meter binds the store under
// it, and its Bound decides what Decide would; a store that embeds the
// meter is not bound. (That the Bound's decisions are counted: the
// service tests read them in /metrics, the engine deciding through it.)
func TestMeterBinds(t *testing.T) {
	m := newMetrics()
	storetest.RunBinder(t, func(t *testing.T) sluice.Binder {
		s := memory.New(memory.Config{})
		t.Cleanup(func() { s.Close() })
		return &meter{next: s, rm: m.rule("r")}
	})
}

// TestMeterOverStoreThatDoesNotBind checks that a meter over a store that
// cannot bind (Redis, memcached, a failure policy) is not bound: its
// decisions go through Decide.
func TestMeterOverStoreThatDoesNotBind(t *testing.T) {
	s := memory.New(memory.Config{})
	defer s.Close()
	mt := &meter{next: struct{ sluice.Store }{s}, rm: newMetrics().rule("r")}
	b, err := mt.Bind(mt, "p:", []sluice.Limit{{Rate: 1, Period: 1 << 30}})
	if b != nil || err != nil {
		t.Errorf("Bind = %v, %v; want nil, nil", b, err)
	}
}
