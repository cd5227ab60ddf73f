package storetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// keysPolicy has a limit of each kind of state: a timestamp, counters per
// window and a log.
var keysPolicy = []sluice.Limit{
	{Rate: 3, Period: time.Minute},
	{Rate: 3, Period: time.Minute, Algorithm: sluice.FixedWindow},
	{Rate: 3, Period: time.Minute, Algorithm: sluice.SlidingWindow, Buckets: 6},
	{Rate: 3, Period: time.Minute, Algorithm: sluice.SlidingLog},
}

// testKeys checks that keys of any bytes and length work, and that
// distinct keys never share state.
func testKeys(t *testing.T, s *suite) {
	long := strings.Repeat("k", 1<<20)
	at250 := strings.Repeat("x", 250)
	keys := []string{
		"", "\x00", "a", "a\x00", "\x00a", "A", "a ", " a", "a b", "a\nb", "a\r\n",
		"{", "}", "{a}", "{}", "a{b}c", "\xff\xfe\xfd", "\xc3\x28", "日本",
		"%s", "*", "?", "[a]", "a:b", "a\\b", "\"a\"",
		at250 + "a", at250 + "b", at250 + "a\x00",
		long, long[:len(long)-1] + "j", long + "k",
	}
	now := t0.Add(8 * time.Hour)
	for pass := range 2 {
		for _, k := range keys {
			d := s.do(t, take(k, now, 1, keysPolicy...))
			if want := 2 - pass; d.Remaining != want {
				t.Errorf("pass %d: take(key %.20q, %d bytes) Remaining = %d, want %d", pass, k, len(k), d.Remaining, want)
			}
		}
	}
	// Prefix+Key names the state: the cut between them does not matter.
	s.do(t, take("bc", now, 1, keysPolicy...))
	d := s.do(t, sluice.Request{Prefix: "b", Key: "c", Limits: keysPolicy, Cost: 1, Now: now})
	if d.Remaining != 1 {
		t.Errorf(`Prefix "b" Key "c" after Key "bc": Remaining = %d, want 1`, d.Remaining)
	}
}

// testSharedState checks that limits differing only in Rate or Burst share
// their state, and that limits of other periods, bucket counts or
// staggering do not.
func testSharedState(t *testing.T, s *suite) {
	now := t0.Add(9 * time.Hour)
	for _, l := range oneOfEach {
		t.Run(policyName([]sluice.Limit{l}), func(t *testing.T) {
			s := s.sub(t)
			s.do(t, take("k", now, 4, l))
			// Rates that keep every interval on the microsecond grid.
			for _, r := range []int{l.Rate / 2, 2 * l.Rate, 5 * l.Rate} {
				other := l
				other.Rate, other.Burst = r, 0
				s.do(t, peek("k", now, 1, other))
			}
			if l.Algorithm == sluice.GCRA {
				other := l
				other.Burst = l.MaxBurst() + 5
				s.do(t, peek("k", now, 1, other))
			}
			different := []sluice.Limit{l, l}
			different[0].Period *= 2
			different[1].Staggered = !l.Staggered
			if l.Algorithm == sluice.SlidingWindow || l.Algorithm == sluice.ApproxSlidingWindow {
				different[1].Buckets = l.BucketCount() / 2
			}
			for _, other := range different {
				if other.StateID() == l.StateID() {
					continue // staggering means nothing but to fixed windows
				}
				if d := s.do(t, peek("k", now, 1, other)); d.Remaining != other.MaxBurst()-1 {
					t.Errorf("peek(%v) after take(%v) Remaining = %d, want %d (fresh)", other, l, d.Remaining, other.MaxBurst()-1)
				}
			}
		})
	}
}

// Concurrency: goroutines × takes per goroutine, all at one instant.
const (
	goroutines = 64
	takesEach  = 50
)

// testConcurrency checks that concurrent takes on one key at one instant
// admit exactly MaxBurst: no read-then-write race over-admits or loses
// an admission, also for a multi-limit policy.
func testConcurrency(t *testing.T, s *suite) {
	hour := func(l sluice.Limit) sluice.Limit { l.Period = time.Hour; l.Rate = 100; return l }
	cases := [][]sluice.Limit{
		{hour(gcra)}, {{Rate: 10, Period: time.Hour, Burst: 100}},
		{hour(fixed)}, {hour(staggered)}, {hour(sliding)}, {hour(approx4)}, {hour(slidingLog)},
		{
			{Rate: 100, Period: time.Hour},
			{Rate: 60, Period: time.Hour, Algorithm: sluice.FixedWindow},
			{Rate: 80, Period: time.Hour, Algorithm: sluice.SlidingLog},
		},
	}
	for _, limits := range cases {
		t.Run(policyName(limits), func(t *testing.T) {
			s := s.sub(t)
			now := t0.Add(10 * time.Hour)
			want := limits[0].MaxBurst()
			for _, l := range limits {
				want = min(want, l.MaxBurst())
			}
			r := s.request(take("k", now, 1, limits...))
			var admitted, failed atomic.Int64
			var firstErr error
			var once sync.Once
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					for range takesEach {
						d, err := s.store.Decide(t.Context(), r)
						switch {
						case err != nil:
							failed.Add(1)
							once.Do(func() { firstErr = err })
						case d.Allowed:
							admitted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if n := failed.Load(); n > 0 {
				t.Errorf("%d of %d concurrent takes failed; first: %v", n, goroutines*takesEach, firstErr)
			}
			if got := int(admitted.Load()); got != want {
				t.Fatalf("%d goroutines × %d takes admitted %d, want exactly %d", goroutines, takesEach, got, want)
			}
			// The state is what the admitted takes, one after another,
			// leave; the denied ones consumed nothing on any limit.
			for range want {
				s.ref.apply(r)
			}
			s.do(t, peek("k", now, 1, limits...))
			for _, l := range limits {
				s.do(t, peek("k", now, 1, l))
			}
		})
	}
}

// testCancelledContext checks that a cancelled context gives an error or
// a normal decision, never a panic, and leaves the store working.
func testCancelledContext(t *testing.T, s *suite) {
	now := t0.Add(11 * time.Hour)
	r := s.request(take("k", now, 1, gcra))
	d, err := s.store.Decide(cancelled(t), r)
	switch {
	case err != nil:
		if !errors.Is(err, context.Canceled) && !errors.Is(err, sluice.ErrStore) {
			t.Errorf("Decide(cancelled context) error = %v, want one wrapping context.Canceled or sluice.ErrStore", err)
		}
		// Whether the take happened is unknown; the store must still work.
		d, err := s.store.Decide(t.Context(), r)
		if err != nil {
			t.Fatalf("Decide after a cancelled one: %v", err)
		}
		// 9 if the cancelled take never reached the store, 8 if it did.
		if !d.Allowed || (d.Remaining != 9 && d.Remaining != 8) {
			t.Errorf("take after a cancelled one = allowed %v, Remaining %d; want true, 9 or 8", d.Allowed, d.Remaining)
		}
	default:
		want := s.ref.apply(r)
		if diff := diffDecision(d, want); diff != "" {
			t.Errorf("Decide(cancelled context) = %s, want %s", fmtDecision(d), fmtDecision(want))
		}
		s.do(t, take("k", now, 1, gcra))
	}
	if _, err := s.store.Decide(cancelled(t), s.request(peek("k", now, 1, gcra))); err != nil &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, sluice.ErrStore) {
		t.Errorf("peek with a cancelled context: error = %v, want one wrapping context.Canceled or sluice.ErrStore", err)
	}
}

// testStoreClock checks that a zero Request.Now uses the store's clock,
// reported in Decision.Time, consistently with explicit times.
func testStoreClock(t *testing.T, s *suite) {
	for _, l := range []sluice.Limit{
		{Rate: 1, Period: time.Hour},
		{Rate: 1, Period: time.Hour, Algorithm: sluice.SlidingLog},
	} {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			s := s.sub(t)
			r := s.request(take("k", time.Time{}, 1, l))
			before := time.Now()
			d1, err := s.store.Decide(t.Context(), r)
			after := time.Now()
			if err != nil {
				t.Fatalf("Decide(zero Now) error: %v", err)
			}
			if !d1.Allowed || d1.Remaining != 0 {
				t.Errorf("first take = allowed %v, Remaining %d; want true, 0", d1.Allowed, d1.Remaining)
			}
			if d1.Time.Before(before.Add(-time.Minute)) || d1.Time.After(after.Add(time.Minute)) {
				t.Errorf("Decision.Time = %v, want within a minute of %v", d1.Time, before)
			}
			d2, err := s.store.Decide(t.Context(), r)
			if err != nil {
				t.Fatalf("Decide(zero Now) error: %v", err)
			}
			// Unix times: Sub would use monotonic readings, which the store's
			// state does not keep.
			if want := time.Duration(d1.Time.Add(time.Hour).UnixNano() - d2.Time.UnixNano()); d2.Allowed || d2.RetryAfter != want {
				t.Errorf("second take = allowed %v, RetryAfter %v; want false, %v (first at %v, second at %v)",
					d2.Allowed, d2.RetryAfter, want, d1.Time, d2.Time)
			}
			// The store's times and explicit times are one clock.
			for _, c := range []struct {
				now  time.Time
				want bool
			}{{d1.Time, false}, {d1.Time.Add(time.Hour - time.Microsecond), false}, {d1.Time.Add(time.Hour), true}} {
				d, err := s.store.Decide(t.Context(), s.request(peek("k", c.now, 1, l)))
				if err != nil || d.Allowed != c.want {
					t.Errorf("peek at first take's Time + %v = allowed %v, %v; want %v", c.now.Sub(d1.Time), d.Allowed, err, c.want)
				}
			}
		})
	}
}
