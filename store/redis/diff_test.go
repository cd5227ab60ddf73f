package redis

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

var traceCount = flag.Int("traces", 2000, "random traces TestDifferential plays")

// randomLimit returns a valid limit of algorithm a whose emission interval
// and sub-window width are whole microseconds, so the script can be exact.
func randomLimit(rng *rand.Rand, a sluice.Algorithm) sluice.Limit {
	rate := 1 + rng.IntN(12)
	unit := []time.Duration{time.Microsecond, 7 * time.Microsecond, time.Millisecond, 37 * time.Millisecond, time.Second}[rng.IntN(5)]
	l := sluice.Limit{Rate: rate, Algorithm: a}
	switch a {
	case sluice.GCRA:
		l.Period = time.Duration(rate) * unit * time.Duration(1+rng.IntN(50))
		if rng.IntN(2) == 0 {
			l.Burst = 1 + rng.IntN(3*rate)
		}
	case sluice.FixedWindow:
		l.Period = unit * time.Duration(1+rng.IntN(100))
		l.Staggered = rng.IntN(2) == 0
	case sluice.SlidingWindow, sluice.ApproxSlidingWindow:
		g := 1 + rng.IntN(12)
		if rng.IntN(3) > 0 {
			l.Buckets = g
		} else {
			g = sluice.DefaultBuckets
		}
		l.Period = time.Duration(g) * unit * time.Duration(1+rng.IntN(20))
	case sluice.SlidingLog:
		l.Period = unit * time.Duration(1+rng.IntN(100))
		if rng.IntN(8) == 0 {
			l.Rate = 600 + rng.IntN(100) // over 512 words: read by GETRANGE
		}
	}
	return l
}

// randomPolicy returns one to three limits with distinct StateIDs.
func randomPolicy(rng *rand.Rand) []sluice.Limit {
	var ls []sluice.Limit
	seen := map[uint64]bool{}
	for range 1 + rng.IntN(3) {
		l := randomLimit(rng, sluice.Algorithm(rng.IntN(5)))
		if l.Validate() != nil || seen[l.StateID()] {
			continue
		}
		seen[l.StateID()] = true
		ls = append(ls, l)
	}
	if len(ls) == 0 {
		ls = append(ls, sluice.Limit{Rate: 3, Period: 3 * time.Millisecond})
	}
	return ls
}

func minBurst(ls []sluice.Limit) int {
	m := ls[0].MaxBurst()
	for _, l := range ls[1:] {
		m = min(m, l.MaxBurst())
	}
	return m
}

func maxPeriod(ls []sluice.Limit) time.Duration {
	var m time.Duration
	for _, l := range ls {
		m = max(m, l.Period)
	}
	return m
}

// runTrace plays one random trace against s and against package
// algorithm on states kept here, and reports the first difference.
// traceStats counts what the traces did, to show they deny as well as allow.
type traceStats struct{ allowed, denied, refunds, resets atomic.Int64 }

func runTrace(ctx context.Context, s *Store, seed uint64, prefix string, steps int, st *traceStats) error {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	limits := randomPolicy(rng)
	key := fmt.Sprintf("k{%d}\x00}", seed)
	states := make([][]int64, len(limits))
	for i, l := range limits {
		states[i] = make([]int64, algorithm.Words(l))
	}
	type taken struct {
		at   time.Time
		cost int
	}
	var takes []taken
	period := maxPeriod(limits)
	step := max(int64(period)/int64(10*limits[0].Rate)/1000, 1) // µs
	now := t0.Add(time.Duration(rng.Int64N(1e9)) * time.Microsecond)
	for i := range steps {
		switch r := rng.IntN(100); {
		case r < 3:
			now = now.Add(time.Duration(rng.Int64N(int64(period)/1000*3+1)) * time.Microsecond) // jump
		case r < 8:
			now = now.Add(-time.Duration(rng.Int64N(int64(period)/1000+1)) * time.Microsecond) // back
		default:
			now = now.Add(time.Duration(rng.Int64N(step*2+1)) * time.Microsecond)
		}
		cost := 1 + rng.IntN(min(minBurst(limits), 4))
		if rng.IntN(10) == 0 {
			cost = 1 + rng.IntN(minBurst(limits))
		}
		req := sluice.Request{Prefix: prefix, Key: key, Limits: limits, Cost: cost, Now: now}
		switch r := rng.IntN(100); {
		case r < 15:
			req.Op = sluice.OpPeek
		case r < 25 && len(takes) > 0:
			k := rng.IntN(len(takes))
			req.Op, req.At, req.Cost = sluice.OpRefund, takes[k].at, takes[k].cost
			takes = append(takes[:k], takes[k+1:]...)
		case r < 27:
			req.Op = sluice.OpReset
		}
		got, err := s.Decide(ctx, req)
		if err != nil {
			return fmt.Errorf("step %d: Decide(%v cost %d) = %w", i, req.Op, req.Cost, err)
		}
		want := reference(limits, states, prefix+key, req)
		if got != want {
			return fmt.Errorf("step %d: %v of %d at +%v under %v:\n got  %+v\n want %+v",
				i, req.Op, req.Cost, now.Sub(t0), limits, got, want)
		}
		switch req.Op {
		case sluice.OpTake, sluice.OpPeek:
			if got.Allowed {
				st.allowed.Add(1)
			} else {
				st.denied.Add(1)
			}
			if req.Op == sluice.OpTake && got.Allowed {
				takes = append(takes, taken{now, req.Cost})
			}
		case sluice.OpRefund:
			st.refunds.Add(1)
		case sluice.OpReset:
			st.resets.Add(1)
			takes = takes[:0]
		}
	}
	return nil
}

// reference applies r to states, the states of name under r.Limits, as
// package algorithm does, and returns the decision a store must give:
// for a refund, a peek of its cost just after; for a reset, a peek of 1.
func reference(limits []sluice.Limit, states [][]int64, name string, r sluice.Request) sluice.Decision {
	n := r.Now.UnixNano()
	op, cost := r.Op, r.Cost
	switch r.Op {
	case sluice.OpRefund:
		algorithm.RefundAll(limits, states, name, r.At.UnixNano(), n, r.Cost)
		op = sluice.OpPeek
	case sluice.OpReset:
		for _, st := range states {
			clear(st)
		}
		op, cost = sluice.OpPeek, 1
	}
	d := algorithm.Decide(limits, states, name, n, cost, op)
	d.Time = r.Now
	return d
}

// TestDifferential checks that the script gives exactly the decisions of
// package algorithm on thousands of random traces: every algorithm,
// multi-limit policies, costs, peeks, refunds, resets and a clock that
// jumps and steps back.
func TestDifferential(t *testing.T) {
	traces, steps := *traceCount, 60
	if testing.Short() {
		traces = 200
	}
	s := newStore(t, Config{})
	prefix := uniquePrefix(t)
	ctx := context.Background()
	var (
		mu    sync.Mutex
		fails []error
		wg    sync.WaitGroup
	)
	var st traceStats
	seeds := make(chan uint64)
	for range 16 {
		wg.Go(func() {
			for seed := range seeds {
				if err := runTrace(ctx, s, seed, prefix, steps, &st); err != nil {
					mu.Lock()
					fails = append(fails, fmt.Errorf("seed %d: %w", seed, err))
					mu.Unlock()
				}
			}
		})
	}
	for seed := range uint64(traces) {
		seeds <- seed
	}
	close(seeds)
	wg.Wait()
	t.Logf("%d traces: %d allowed, %d denied, %d refunds, %d resets",
		traces, st.allowed.Load(), st.denied.Load(), st.refunds.Load(), st.resets.Load())
	if st.allowed.Load() == 0 || st.denied.Load() < st.allowed.Load()/10 {
		t.Errorf("traces allowed %d and denied %d: not a useful mix", st.allowed.Load(), st.denied.Load())
	}
	for i, err := range fails {
		if i == 5 {
			t.Errorf("... and %d more failing traces", len(fails)-5)
			break
		}
		t.Error(err)
	}
}
