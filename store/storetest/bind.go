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
	t.Run("Admit", func(t *testing.T) { testAdmit(t, newStore(t)) })
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
	runBound(t, [][]sluice.Limit{{boundGCRA}, boundGCRAFixed}, func(t *testing.T, limits []sluice.Limit, key string) {
		testBoundClockKey(t, s, limits, key)
	})
}

// The policies and keys the Bound tests run: one GCRA limit alone (the
// policy a store may decide on a path of its own) and with another, and
// keys of the shapes a store may hash apart (short, an IPv4 and an IPv6
// address, one a separator splits, one longer than a slot holds).
var (
	boundGCRA      = sluice.Limit{Rate: 3, Period: time.Hour}
	boundGCRAFixed = []sluice.Limit{boundGCRA, {Rate: 5, Period: 24 * time.Hour, Algorithm: sluice.FixedWindow}}
	boundKeys      = []string{"k", "203.0.113.7", "2001:db8::1", "a:b:c:defgh", strings.Repeat("x", 300)}
)

// runBound runs test on each of policies with each of boundKeys, each a
// subtest.
func runBound(t *testing.T, policies [][]sluice.Limit, test func(t *testing.T, limits []sluice.Limit, key string)) {
	for _, limits := range policies {
		for _, key := range boundKeys {
			t.Run(fmt.Sprintf("%s/key=%.12q", policyName(limits), key), func(t *testing.T) { test(t, limits, key) })
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

// testAdmit checks the Admit of a Bound that is a sluice.Admitter against
// its Decide: two Bounds of the same limits under two prefixes are given
// the same takes on a time grid, one through Decide and one through
// Admit; each take must be allowed alike (or refused with the same
// error), and a peek after it must get the same Decision of both, so
// that Admit leaves the state Decide would. A Bound that is no
// Admitter has nothing to check.
func testAdmit(t *testing.T, s sluice.Binder) {
	policies := [][]sluice.Limit{
		{boundGCRA},
		{{Rate: 10, Period: time.Second, Burst: 4}},
		boundGCRAFixed,
		{{Rate: 5, Period: time.Minute, Algorithm: sluice.SlidingWindow}},
	}
	runBound(t, policies, func(t *testing.T, limits []sluice.Limit, key string) { testAdmitKey(t, s, limits, key) })
}

func testAdmitKey(t *testing.T, s sluice.Binder, limits []sluice.Limit, key string) {
	ctx := context.Background()
	byDecide, err := s.Bind(s, newPrefix(t), limits)
	if err != nil || byDecide == nil {
		t.Fatalf("Bind = %v, %v; want a Bound", byDecide, err)
	}
	b, err := s.Bind(s, newPrefix(t), limits)
	if err != nil {
		t.Fatalf("Bind = %v", err)
	}
	byAdmit, ok := b.(sluice.Admitter)
	if !ok {
		return
	}
	step := limits[0].Interval()
	steps := []time.Duration{0, 0, step / 4, step / 2, step, 3 * step, time.Nanosecond}
	maxCost := limits[0].MaxBurst()
	for _, l := range limits {
		maxCost = min(maxCost, l.MaxBurst())
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	for i := range 300 {
		now = now.Add(steps[(i*7+i/5)%len(steps)])
		cost := (i*3+i/7)%(maxCost+2) - (i % 11 / 10) // from -1 to maxCost+1
		d, errD := byDecide.Decide(ctx, key, sluice.OpTake, cost, now)
		allowed, errA := byAdmit.Admit(ctx, key, cost, now)
		if (errD == nil) != (errA == nil) || errA != nil && errors.Is(errA, sluice.ErrCostExceedsBurst) != errors.Is(errD, sluice.ErrCostExceedsBurst) {
			t.Fatalf("take %d of %d: Admit error %v, Decide error %v", i, cost, errA, errD)
		}
		if allowed != d.Allowed {
			t.Fatalf("take %d of %d at +%v: Admit = %v, Decide allowed %v", i, cost, now.Sub(start), allowed, d.Allowed)
		}
		pd, errD := byDecide.Decide(ctx, key, sluice.OpPeek, 1, now)
		pa, errA := b.Decide(ctx, key, sluice.OpPeek, 1, now)
		if errD != nil || errA != nil || pd != pa {
			t.Fatalf("peek after take %d: by Admit %+v, %v; by Decide %+v, %v", i, pa, errA, pd, errD)
		}
	}
}
