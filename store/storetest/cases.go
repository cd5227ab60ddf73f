package storetest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// forEach runs fn in a subtest per limit, each with keys of its own.
func forEach(t *testing.T, s *suite, limits []sluice.Limit, fn func(t *testing.T, s *suite, l sluice.Limit)) {
	t.Helper()
	for _, l := range limits {
		t.Run(policyName([]sluice.Limit{l}), func(t *testing.T) { fn(t, s.sub(t), l) })
	}
}

// testBurst checks that at one instant exactly MaxBurst units of cost 1
// are admitted, counting down Remaining.
func testBurst(t *testing.T, s *suite) {
	forEach(t, s, append(oneOfEach, gcraSlow), func(t *testing.T, s *suite, l sluice.Limit) {
		now := t0.Add(123 * time.Millisecond)
		admitted := 0
		for i := range l.MaxBurst() + 3 {
			d := s.do(t, take("k", now, 1, l))
			if d.Allowed {
				admitted++
				if want := l.MaxBurst() - i - 1; d.Remaining != want {
					t.Errorf("take %d: Remaining = %d, want %d", i, d.Remaining, want)
				}
			}
		}
		if admitted != l.MaxBurst() {
			t.Errorf("admitted %d at one instant, want MaxBurst %d", admitted, l.MaxBurst())
		}
	})
}

// testCost checks takes of cost n, and that a cost above MaxBurst fails
// with ErrCostExceedsBurst.
func testCost(t *testing.T, s *suite) {
	forEach(t, s, oneOfEach, func(t *testing.T, s *suite, l sluice.Limit) {
		now := t0.Add(time.Hour)
		b := l.MaxBurst()
		n := max(b/2, 1)
		if d := s.do(t, take("k", now, n, l)); !d.Allowed || d.Remaining != b-n {
			t.Errorf("take(cost %d) = allowed %v, Remaining %d; want true, %d", n, d.Allowed, d.Remaining, b-n)
		}
		if d := s.do(t, take("k", now, b-n+1, l)); d.Allowed {
			t.Errorf("take(cost %d) with %d left allowed", b-n+1, b-n)
		}
		if d := s.do(t, take("k", now, b-n, l)); !d.Allowed || d.Remaining != 0 {
			t.Errorf("take(cost %d) = allowed %v, Remaining %d; want true, 0", b-n, d.Allowed, d.Remaining)
		}
		s.fails(t, take("other", now, b+1, l), sluice.ErrCostExceedsBurst)
		s.fails(t, peek("other", now, b+1, l), sluice.ErrCostExceedsBurst)
		s.do(t, peek("other", now, 1, l)) // untouched
	})
}

// testInvalid checks that invalid requests fail with the right sentinel
// and touch no state, not even the state of their valid limits.
func testInvalid(t *testing.T, s *suite) {
	now := t0.Add(2 * time.Hour)
	small := sluice.Limit{Rate: 3, Period: time.Minute}
	s.do(t, take("k", now, 2, gcra, fixed))
	tests := []struct {
		name string
		r    sluice.Request
		want error
	}{
		{"cost 0", take("k", now, 0, gcra, fixed), sluice.ErrInvalidRequest},
		{"negative cost", take("k", now, -1, gcra, fixed), sluice.ErrInvalidRequest},
		{"peek cost 0", peek("k", now, 0, gcra, fixed), sluice.ErrInvalidRequest},
		{"refund cost 0", refund("k", now, now, 0, gcra, fixed), sluice.ErrInvalidRequest},
		{"refund without at", refund("k", now, time.Time{}, 1, gcra, fixed), sluice.ErrInvalidRequest},
		{"insert cost 0", insert("k", now, 0, gcra, fixed), sluice.ErrInvalidRequest},
		{"insert exceeds one burst", insert("k", now, 5, gcra, fixed, small), sluice.ErrCostExceedsBurst},
		{"reward exceeds one burst", insert("k", now, -5, gcra, fixed, small), sluice.ErrCostExceedsBurst},
		{"no limits", take("k", now, 1), sluice.ErrInvalidRequest},
		{"unknown op", sluice.Request{Key: "k", Limits: []sluice.Limit{gcra, fixed}, Op: 200, Cost: 1, Now: now}, sluice.ErrInvalidRequest},
		{"zero limit", take("k", now, 1, gcra, fixed, sluice.Limit{}), sluice.ErrInvalidLimit},
		{"zero rate", take("k", now, 1, gcra, fixed, sluice.Limit{Period: time.Second}), sluice.ErrInvalidLimit},
		{"unknown algorithm", take("k", now, 1, gcra, fixed, sluice.Limit{Rate: 1, Period: time.Second, Algorithm: 99}), sluice.ErrInvalidLimit},
		{"reset with invalid limit", resetKey("k", now, gcra, fixed, sluice.Limit{Rate: -1, Period: time.Second}), sluice.ErrInvalidLimit},
		{"two limits share state", take("k", now, 1, gcra, fixed, sluice.Limit{Rate: 20, Period: time.Second}), sluice.ErrInvalidRequest},
		{"cost exceeds one burst", take("k", now, 5, gcra, fixed, small), sluice.ErrCostExceedsBurst},
		{"time before 1970", take("k", time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), 1, gcra, fixed), sluice.ErrInvalidRequest},
		{"time after 2200", take("k", time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), 1, gcra, fixed), sluice.ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { s.fails(t, tt.r, tt.want) })
	}
	// Nothing was consumed or forgotten by the invalid requests.
	s.do(t, peek("k", now, 1, gcra, fixed))
	s.do(t, peek("k", now, 1, small))
}

// testPeek checks that peeks never consume, however many.
func testPeek(t *testing.T, s *suite) {
	forEach(t, s, oneOfEach, func(t *testing.T, s *suite, l sluice.Limit) {
		now := t0.Add(3 * time.Hour)
		s.do(t, take("k", now, 2, l))
		for i := range 2 * l.MaxBurst() {
			s.do(t, peek("k", now, 1+i%l.MaxBurst(), l))
		}
		admitted := 0
		for range l.MaxBurst() {
			if s.do(t, take("k", now, 1, l)).Allowed {
				admitted++
			}
		}
		if want := l.MaxBurst() - 2; admitted != want {
			t.Errorf("after peeks, admitted %d, want %d", admitted, want)
		}
		if d := s.do(t, peek("fresh", now, 1, l)); !d.Allowed || d.Remaining != l.MaxBurst()-1 {
			t.Errorf("peek(fresh key) = allowed %v, Remaining %d; want true, %d", d.Allowed, d.Remaining, l.MaxBurst()-1)
		}
	})
}

// testReset checks that a reset forgets the key under the limits it
// names, and only under those.
func testReset(t *testing.T, s *suite) {
	forEach(t, s, oneOfEach, func(t *testing.T, s *suite, l sluice.Limit) {
		now := t0.Add(4 * time.Hour)
		other := sluice.Limit{Rate: 100, Period: time.Hour}
		s.do(t, take("k", now, l.MaxBurst(), l, other))
		if d := s.do(t, take("k", now, 1, l, other)); d.Allowed {
			t.Fatalf("take after MaxBurst allowed")
		}
		s.do(t, resetKey("k", now, l))
		if d := s.do(t, take("k", now, 1, l)); !d.Allowed || d.Remaining != l.MaxBurst()-1 {
			t.Errorf("take after reset = allowed %v, Remaining %d; want true, %d", d.Allowed, d.Remaining, l.MaxBurst()-1)
		}
		// The other limit was not named by the reset: it remembers.
		if d := s.do(t, peek("k", now, 1, other)); d.Remaining != other.MaxBurst()-l.MaxBurst()-1 {
			t.Errorf("peek(other limit) Remaining = %d, want %d", d.Remaining, other.MaxBurst()-l.MaxBurst()-1)
		}
		s.do(t, resetKey("never-seen", now, l, other))
		s.do(t, peek("never-seen", now, 1, l, other))
	})
}

// testRefund checks that a refund gives back exactly what its take
// consumed, once, and never more than the full allowance.
func testRefund(t *testing.T, s *suite) {
	forEach(t, s, oneOfEach, func(t *testing.T, s *suite, l sluice.Limit) {
		now := t0.Add(5 * time.Hour)
		s.do(t, take("k", now, 2, l))
		d := s.do(t, take("k", now, 3, l))
		if !d.Allowed {
			t.Fatalf("take(cost 3) denied with %d of %d taken", 2, l.MaxBurst())
		}
		s.do(t, refund("k", now, d.Time, 3, l))
		if d := s.do(t, peek("k", now, 1, l)); d.Remaining != l.MaxBurst()-3 {
			t.Errorf("after refund, peek Remaining = %d, want %d", d.Remaining, l.MaxBurst()-3)
		}
		// Refunding a fresh key does not raise it above its allowance.
		s.do(t, refund("fresh", now, now, 1, l))
		if d := s.do(t, peek("fresh", now, 1, l)); d.Remaining != l.MaxBurst()-1 {
			t.Errorf("refund of a fresh key, peek Remaining = %d, want %d", d.Remaining, l.MaxBurst()-1)
		}
		// Later in the trace, a refund of an older take.
		later := now.Add((l.Period / 3).Truncate(time.Microsecond))
		s.do(t, take("k", later, 1, l))
		s.do(t, refund("k", later, now, 2, l))
		s.do(t, peek("k", later, 1, l))
	})
}

// testInsert checks that an insert counts whether or not it fits, on
// every limit of a policy (unlike a take, not all or nothing), that the
// wait after penalties stays bounded, and that a reward gives back what
// was spent and no more.
func testInsert(t *testing.T, s *suite) {
	forEach(t, s, oneOfEach, func(t *testing.T, s *suite, l sluice.Limit) {
		now := t0.Add(5*time.Hour + 30*time.Minute)
		other := sluice.Limit{Rate: 100, Period: time.Hour}
		for range 3 {
			if d := s.do(t, insert("k", now, l.MaxBurst(), l, other)); d.Allowed {
				t.Fatalf("allowed after a penalty of MaxBurst")
			}
		}
		// Counted on the other limit too, though l was over.
		if d := s.do(t, peek("k", now, 1, other)); d.Remaining != other.MaxBurst()-3*l.MaxBurst()-1 {
			t.Errorf("peek(other) Remaining = %d, want %d", d.Remaining, other.MaxBurst()-3*l.MaxBurst()-1)
		}
		s.do(t, insert("fresh", now, -1, l))
		if d := s.do(t, peek("fresh", now, 1, l)); d.Remaining != l.MaxBurst()-1 {
			t.Errorf("reward of a fresh key, peek Remaining = %d, want %d", d.Remaining, l.MaxBurst()-1)
		}
		s.do(t, take("r", now, 3, l))
		s.do(t, insert("r", now, -2, l))
		s.do(t, insert("r", now, -2, l))
		if d := s.do(t, take("r", now, l.MaxBurst(), l)); !d.Allowed {
			t.Errorf("take of MaxBurst after a take of 3 and rewards of 4 denied")
		}
		// A penalty on a key with a refund in the same window.
		later := now.Add((l.Period / 4).Truncate(time.Microsecond))
		s.do(t, insert("k", later, 1, l))
		s.do(t, insert("k", later, -1, l))
		s.do(t, peek("k", later, 1, l))
	})
}

// testPolicy checks that a multi-limit policy is all-or-nothing and that
// its decision describes the binding limit.
func testPolicy(t *testing.T, s *suite) {
	perSecond := sluice.Limit{Rate: 10, Period: time.Second}
	perMinute := sluice.Limit{Rate: 20, Period: time.Minute}
	fixed3 := sluice.Limit{Rate: 3, Period: time.Second, Algorithm: sluice.FixedWindow}
	policy := []sluice.Limit{perSecond, perMinute, fixed3}
	now := t0.Add(6 * time.Hour)
	for range 3 {
		s.do(t, take("k", now, 1, policy...))
	}
	d := s.do(t, take("k", now, 1, policy...))
	if d.Allowed || d.Limit != fixed3 {
		t.Errorf("4th take = allowed %v by %v, want denied by %v", d.Allowed, d.Limit, fixed3)
	}
	// The denied take consumed nothing on the limits that allowed it.
	if d := s.do(t, peek("k", now, 1, perSecond)); d.Remaining != 6 {
		t.Errorf("peek(%v) Remaining = %d, want 6", perSecond, d.Remaining)
	}
	if d := s.do(t, peek("k", now, 1, perMinute)); d.Remaining != 16 {
		t.Errorf("peek(%v) Remaining = %d, want 16", perMinute, d.Remaining)
	}
	// Across windows the per-minute limit binds in the end.
	for i := range 40 {
		s.do(t, take("k", now.Add(time.Duration(i)*200*time.Millisecond), 1, policy...))
	}
	// The binding denial is the one with the longest wait.
	slow := sluice.Limit{Rate: 5, Period: time.Minute, Burst: 2}
	s.do(t, take("j", now, 2, slow, fixed))
	d = s.do(t, take("j", now, 1, slow, fixed))
	if d.Allowed || d.Limit != slow {
		t.Errorf("take = allowed %v by %v, want denied by %v", d.Allowed, d.Limit, slow)
	}
	s.do(t, peek("j", now, 1, fixed))
}

// testExpiry checks that once ResetAfter has passed, a key behaves as a
// key never seen.
func testExpiry(t *testing.T, s *suite) {
	forEach(t, s, append(oneOfEach, gcraSlow, sliding4, log1), func(t *testing.T, s *suite, l sluice.Limit) {
		now := t0.Add(7 * time.Hour)
		var d sluice.Decision
		for i := range l.MaxBurst() + 1 {
			step := (l.Period / time.Duration(3*l.Rate)).Truncate(time.Microsecond)
			d = s.do(t, take("k", now.Add(time.Duration(i)*step), 1, l))
		}
		// Round up onto the suite's microsecond grid (a staggered window
		// ends on an arbitrary nanosecond).
		at := d.Time.Add(d.ResetAfter + time.Microsecond - 1).Truncate(time.Microsecond)
		r := s.request(take("k", at, 1, l))
		fresh := algorithm.Decide(r.Limits, [][]int64{make([]int64, algorithm.Words(l))}, r.Prefix+r.Key, at.UnixNano(), 1, sluice.OpTake)
		fresh.Time = at
		got := s.do(t, take("k", at, 1, l))
		if diff := diffDecision(got, fresh); diff != "" {
			t.Errorf("take ResetAfter (%v) after the last = %s, want a fresh key's %s", d.ResetAfter, fmtDecision(got), fmtDecision(fresh))
		}
	})
}

// testAnswers checks what refunds and resets answer: what a peek just
// after would get, of the refund's cost or of 1 for a reset (see
// sluice.Store), for one limit and within a policy.
func testAnswers(t *testing.T, s *suite) {
	forEach(t, s, append(oneOfEach, gcraSlow), func(t *testing.T, s *suite, l sluice.Limit) {
		now := t0.Add(12 * time.Hour)
		b := l.MaxBurst()
		other := sluice.Limit{Rate: 100, Period: time.Hour, Algorithm: sluice.SlidingLog}
		s.do(t, take("k", now, b, l, other))
		tests := []struct {
			name      string
			r         sluice.Request
			peekCost  int
			remaining int // of the answer, which is allowed
		}{
			{"refund of a full key", refund("k", now, now, 1, l, other), 1, 0},
			{"refund of cost 2", refund("k", now, now, 2, l), 2, min(b-2, 1)},
			{"refund of a fresh key", refund("fresh", now, now, 1, l, other), 1, b - 1},
			{"reset of one limit", resetKey("k", now, l), 1, b - 1},
			{"reset of a policy", resetKey("k", now, l, other), 1, b - 1},
			{"reset of a fresh key", resetKey("fresh2", now, l, other), 1, b - 1},
		}
		for _, tt := range tests {
			d := s.do(t, tt.r)
			if !d.Allowed || d.Remaining != tt.remaining {
				t.Errorf("%s: Decide = allowed %v, Remaining %d; want true, %d", tt.name, d.Allowed, d.Remaining, tt.remaining)
			}
			p := s.do(t, peek(tt.r.Key, now, tt.peekCost, tt.r.Limits...))
			if diff := diffDecision(d, p); diff != "" {
				t.Errorf("%s: Decide = %s, want the peek just after: %s (%s)", tt.name, fmtDecision(d), fmtDecision(p), diff)
			}
		}
	})
}
