package memory

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/storetest"
)

// t0 is a real date on which tests drive the store with explicit times.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"default", Config{}},
		{"one shard", Config{Shards: 1, SweepInterval: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			newStore := func(t *testing.T) *Store {
				s := New(c.cfg)
				t.Cleanup(func() { s.Close() })
				return s
			}
			storetest.Run(t, func(t *testing.T) sluice.Store { return newStore(t) })
			t.Run("Binder", func(t *testing.T) {
				storetest.RunBinder(t, func(t *testing.T) sluice.Binder { return newStore(t) })
			})
		})
	}
}

// allocLimits is a policy of each algorithm, and a multi-limit one.
var allocLimits = [][]sluice.Limit{
	{{Rate: 10, Period: time.Second}},
	{{Rate: 10, Period: time.Second, Algorithm: sluice.FixedWindow}},
	{{Rate: 10, Period: time.Second, Algorithm: sluice.FixedWindow, Staggered: true}},
	{{Rate: 10, Period: time.Second, Algorithm: sluice.SlidingWindow}},
	{{Rate: 10, Period: time.Second, Algorithm: sluice.ApproxSlidingWindow, Buckets: 4}},
	{{Rate: 10, Period: time.Second, Algorithm: sluice.SlidingLog}},
	{{Rate: 10, Period: time.Second}, {Rate: 100, Period: time.Minute, Algorithm: sluice.SlidingWindow}},
}

// TestZeroAllocs checks that deciding on a key the store holds allocates
// nothing, for every algorithm and operation, with and without Now.
func TestZeroAllocs(t *testing.T) {
	s := New(Config{})
	defer s.Close()
	ctx := context.Background()
	for _, limits := range allocLimits {
		name := fmt.Sprint(limits)
		r := sluice.Request{Prefix: "sluice:login:", Key: "198.51.100.23", Limits: limits, Cost: 1, Now: t0}
		if _, err := s.Decide(ctx, r); err != nil {
			t.Fatalf("Decide(%s) error: %v", name, err)
		}
		step := 0
		for _, op := range []sluice.Op{sluice.OpTake, sluice.OpPeek, sluice.OpRefund} {
			for _, clock := range []bool{false, true} {
				got := testing.AllocsPerRun(200, func() {
					r := r
					r.Op = op
					step++
					r.Now = t0.Add(time.Duration(step) * 7 * time.Millisecond)
					r.At = r.Now
					if clock {
						r.Now = time.Time{}
					}
					if _, err := s.Decide(ctx, r); err != nil {
						t.Fatalf("Decide(%s) error: %v", name, err)
					}
				})
				if got != 0 {
					t.Errorf("Decide(%s, %v, store clock %v) allocs = %v, want 0", name, op, clock, got)
				}
			}
		}
		// A Limiter's takes and peeks go through its Bound.
		lim, err := sluice.New(s, sluice.Config{Limits: limits, Action: "login"})
		if err != nil {
			t.Fatalf("sluice.New(%s) error: %v", name, err)
		}
		if _, err := lim.Allow(ctx, "198.51.100.24"); err != nil {
			t.Fatalf("Allow(%s) error: %v", name, err)
		}
		got := testing.AllocsPerRun(200, func() {
			if _, err := lim.Allow(ctx, "198.51.100.24"); err != nil {
				t.Fatalf("Allow(%s) error: %v", name, err)
			}
			if _, err := lim.Peek(ctx, "198.51.100.24"); err != nil {
				t.Fatalf("Peek(%s) error: %v", name, err)
			}
		})
		if got != 0 {
			t.Errorf("Limiter.Allow and Peek(%s) allocs = %v, want 0", name, got)
		}
	}
}

// TestSweeper checks that the background sweeper drops states back to
// empty, keeps the others, and stops on Close.
func TestSweeper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{SweepInterval: time.Minute})
		fast := []sluice.Limit{{Rate: 10, Period: time.Second}, {Rate: 10, Period: time.Second, Algorithm: sluice.SlidingLog}}
		slow := []sluice.Limit{{Rate: 1, Period: time.Hour}, {Rate: 5, Period: time.Hour, Algorithm: sluice.FixedWindow}}
		for i := range 100 {
			mustDecide(t, s, sluice.Request{Key: fmt.Sprint("fast", i), Limits: fast, Cost: 1})
		}
		mustDecide(t, s, sluice.Request{Key: "slow", Limits: slow, Cost: 1})
		if got := s.Len(); got != 202 {
			t.Fatalf("Len() = %d, want 202", got)
		}
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if got := s.Len(); got != 202 {
			t.Errorf("Len() before the first sweep = %d, want 202", got)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := s.Len(); got != 2 {
			t.Errorf("Len() after a sweep = %d, want 2 (the slow key's)", got)
		}
		// The slow key kept its state: it is still over its limit.
		if d := mustDecide(t, s, sluice.Request{Key: "slow", Limits: slow, Cost: 1}); d.Allowed {
			t.Errorf("slow key after a sweep: allowed, want denied")
		}
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if got, gotBytes := s.Len(), s.Bytes(); got != 0 || gotBytes != 0 {
			t.Errorf("Len(), Bytes() after two hours = %d, %d; want 0, 0", got, gotBytes)
		}
		s.Close()
		s.Close() // a second Close does nothing
	})
}

// TestSweepExplicitTime checks that a store driven by explicit times, far
// from its clock, expires states on the requests' timeline.
func TestSweepExplicitTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{SweepInterval: time.Minute, Shards: 1})
		defer s.Close()
		hourly := []sluice.Limit{{Rate: 1, Period: time.Hour}}
		mustDecide(t, s, sluice.Request{Key: "a", Limits: hourly, Cost: 1, Now: t0})
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := s.Len(); got != 1 {
			t.Fatalf("Len() = %d, want 1: the state is not empty at the requests' time", got)
		}
		mustDecide(t, s, sluice.Request{Key: "b", Limits: hourly, Cost: 1, Now: t0.Add(2 * time.Hour)})
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := s.Len(); got != 1 {
			t.Errorf("Len() = %d, want 1: a is empty two hours on", got)
		}
	})
}

func mustDecide(t *testing.T, s *Store, r sluice.Request) sluice.Decision {
	t.Helper()
	d, err := s.Decide(context.Background(), r)
	if err != nil {
		t.Fatalf("Decide(%q) error: %v", r.Key, err)
	}
	return d
}

// TestBoundAsDecide holds a Bound to its contract: it decides as the
// store's Decide decides the same request, with the same state, answers
// and errors. Two stores take one sequence, one through Bound.Decide and
// one through Decide: takes and peeks of every cost up to past the
// burst, on a time grid in two zones, a reset now and then, and times
// outside the range a Bound takes without the full check.
func TestBoundAsDecide(t *testing.T) {
	zone := time.FixedZone("east", 5*3600)
	for _, limits := range [][]sluice.Limit{
		{{Rate: 3, Period: time.Second}},
		{{Rate: 3, Period: time.Second, Burst: 5}},
		{{Rate: 3, Period: time.Second}, {Rate: 10, Period: time.Minute, Algorithm: sluice.SlidingWindow}},
		{{Rate: 8, Period: 2 * time.Second, Algorithm: sluice.FixedWindow}},
		{{Rate: 10, Period: time.Minute, Algorithm: sluice.ApproxSlidingWindow}},
		// Several limits of states in slots (hitAll), and beside them
		// policies it leaves to decideAll: a sliding log, a staggered
		// window, more than maxSlotted limits.
		{{Rate: 3, Period: time.Second}, {Rate: 20, Period: time.Minute, Burst: 25}},
		{{Rate: 8, Period: 2 * time.Second, Algorithm: sluice.FixedWindow}, {Rate: 10, Period: time.Minute, Algorithm: sluice.ApproxSlidingWindow}, {Rate: 30, Period: time.Hour}},
		{{Rate: 3, Period: time.Second}, {Rate: 10, Period: time.Minute, Algorithm: sluice.SlidingLog}},
		{{Rate: 3, Period: time.Second}, {Rate: 10, Period: time.Minute, Algorithm: sluice.FixedWindow, Staggered: true}},
		{{Rate: 3, Period: time.Second}, {Rate: 9, Period: 5 * time.Second}, {Rate: 10, Period: time.Minute}, {Rate: 50, Period: time.Hour}, {Rate: 90, Period: 24 * time.Hour}},
	} {
		t.Run(fmt.Sprint(limits), func(t *testing.T) {
			ctx := context.Background()
			via, direct := New(Config{SweepInterval: -1}), New(Config{SweepInterval: -1})
			defer via.Close()
			defer direct.Close()
			b, err := via.Bind(via, "ns:act:", limits)
			if err != nil || b == nil {
				t.Fatalf("Bind = %v, %v", b, err)
			}
			check := func(i int, key string, op sluice.Op, cost int, now time.Time) {
				t.Helper()
				got, gerr := b.Decide(ctx, key, op, cost, now)
				want, werr := direct.Decide(ctx, sluice.Request{Prefix: "ns:act:", Key: key, Limits: limits, Op: op, Cost: cost, Now: now})
				if fmt.Sprint(gerr) != fmt.Sprint(werr) || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
					t.Fatalf("step %d (%s, op %v, cost %d, %v): Bound %+v, %v; Decide %+v, %v", i, key, op, cost, now, got, gerr, want, werr)
				}
			}
			for i := range 2000 {
				now := t0.Add(time.Duration(i) * 90 * time.Millisecond)
				if i%2 == 1 {
					now = now.In(zone)
				}
				key := fmt.Sprintf("10.0.0.%d", i%3)
				if i%5 == 0 { // kept apart from its slot (see inlineKey)
					key = "2001:db8:85a3:8d3:1319:8a2e:370:7348/" + key
				}
				op := sluice.OpTake
				switch {
				case i%11 == 0:
					op = sluice.OpPeek
				case i%97 == 0:
					op = sluice.OpReset
				}
				check(i, key, op, 1+i%7, now)
			}
			for i, now := range []time.Time{time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2150, 1, 1, 0, 0, 0, 0, zone), time.Date(2250, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(-5, 0)} {
				check(i, "10.0.0.1", sluice.OpTake, 1, now)
			}
		})
	}
}
