package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// RunBinder runs the conformance suite against the Bounds of the stores
// newStore returns (see [sluice.Binder]): every request but a refund is
// decided by a Bound of its Prefix and Limits, bound for that request, and
// must get what Decide would. It also checks that a store that embeds the
// Binder is not bound: its own Decide must not be bypassed.
func RunBinder(t *testing.T, newStore func(t *testing.T) sluice.Binder) {
	t.Helper()
	t.Run("Suite", func(t *testing.T) {
		Run(t, func(t *testing.T) sluice.Store { return bound{newStore(t)} })
	})
	t.Run("StoreClock", func(t *testing.T) { testBoundClock(t, newStore(t)) })
	t.Run("Wrapped", func(t *testing.T) {
		s := newStore(t)
		w := wrapped{Binder: s}
		limits := []sluice.Limit{{Rate: 1, Period: 1 << 40}}
		b, err := w.Bind(w, newPrefix(t), limits)
		if err != nil || b != nil {
			t.Errorf("Bind of a store that embeds the Binder = %v, %v; want nil, nil", b, err)
		}
		b, err = s.Bind(s, newPrefix(t), limits)
		if err != nil || b == nil {
			t.Errorf("Bind of the store itself = %v, %v; want a Bound", b, err)
		}
	})
}

// bound decides each request but refunds through a Bound of its own.
type bound struct{ sluice.Binder }

func (s bound) Decide(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
	if r.Op == sluice.OpRefund {
		return s.Binder.Decide(ctx, r)
	}
	b, err := s.Bind(s.Binder, r.Prefix, r.Limits)
	if err != nil {
		return sluice.Decision{}, err
	}
	return b.Decide(ctx, r.Key, r.Op, r.Cost, r.Now)
}

// wrapped is a store that embeds a Binder, as a wrapper of its Decide
// would; its slice makes it incomparable, as a wrapper may be, which Bind
// must survive.
type wrapped struct {
	sluice.Binder
	_ []string
}

// testBoundClock checks a Bound on the store's own clock, the way a
// Limiter uses it: a burst of takes, then denials, peeks that consume
// nothing, a reset, and invalid costs and ops refused with the errors of
// Request.Validate; for one GCRA limit alone (the policy a store may
// decide on a path of its own) and with another, and keys of several
// shapes.
func testBoundClock(t *testing.T, s sluice.Binder) {
	gcra := sluice.Limit{Rate: 3, Period: time.Hour}
	for _, limits := range [][]sluice.Limit{{gcra}, {gcra, {Rate: 5, Period: 24 * time.Hour, Algorithm: sluice.FixedWindow}}} {
		for _, key := range []string{"k", "203.0.113.7", "2001:db8::1", "a:b:c:defgh", strings.Repeat("x", 300)} {
			t.Run(fmt.Sprintf("%s/key=%.12q", policyName(limits), key), func(t *testing.T) { testBoundClockKey(t, s, limits, key) })
		}
	}
}

func testBoundClockKey(t *testing.T, s sluice.Binder, limits []sluice.Limit, key string) {
	ctx := context.Background()
	b, err := s.Bind(s, newPrefix(t), limits)
	if err != nil || b == nil {
		t.Fatalf("Bind = %v, %v; want a Bound", b, err)
	}
	decide := func(op sluice.Op, cost int) sluice.Decision {
		t.Helper()
		d, err := b.Decide(ctx, key, op, cost, time.Time{})
		if err != nil {
			t.Fatalf("Decide(%v, %d) error: %v", op, cost, err)
		}
		return d
	}
	if d := decide(sluice.OpPeek, 3); !d.Allowed || d.Remaining != 0 {
		t.Errorf("peek of 3 on a fresh key = %+v, want allowed, 0 remaining", d)
	}
	for i := range 3 {
		if d := decide(sluice.OpTake, 1); !d.Allowed || d.Remaining != 2-i {
			t.Errorf("take %d = %+v, want allowed, %d remaining", i+1, d, 2-i)
		}
	}
	if d := decide(sluice.OpTake, 1); d.Allowed || d.RetryAfter <= 0 {
		t.Errorf("take 4 = %+v, want denied with RetryAfter", d)
	}
	if d := decide(sluice.OpPeek, 1); d.Allowed {
		t.Errorf("peek after the burst = %+v, want denied", d)
	}
	if since := time.Since(decide(sluice.OpPeek, 1).Time); since < -time.Minute || since > time.Minute {
		t.Errorf("Decision.Time is %v from the test's clock, want the real time", since)
	}
	if d := decide(sluice.OpReset, 0); !d.Allowed || d.Remaining != 2 {
		t.Errorf("reset = %+v, want what a peek of 1 gets: allowed, 2 remaining", d)
	}
	for _, c := range []struct {
		op   sluice.Op
		cost int
		want error
	}{
		{sluice.OpTake, 0, sluice.ErrInvalidRequest},
		{sluice.OpPeek, -1, sluice.ErrInvalidRequest},
		{sluice.OpTake, 4, sluice.ErrCostExceedsBurst},
		{sluice.OpPeek, 4, sluice.ErrCostExceedsBurst},
		{sluice.OpRefund, 1, sluice.ErrInvalidRequest}, // no At
		{sluice.Op(200), 1, sluice.ErrInvalidRequest},
	} {
		if _, err := b.Decide(ctx, key, c.op, c.cost, time.Time{}); !errors.Is(err, c.want) {
			t.Errorf("Decide(%v, %d) error = %v, want %v", c.op, c.cost, err, c.want)
		}
	}
	if d := decide(sluice.OpPeek, 3); !d.Allowed {
		t.Errorf("peek of 3 after the invalid requests = %+v, want allowed: they must change nothing", d)
	}
}
