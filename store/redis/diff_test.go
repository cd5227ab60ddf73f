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

// traceStats counts what the traces did, to show they deny as well as allow.
type traceStats struct{ allowed, denied, refunds, resets, inserts atomic.Int64 }

// A trace is one random trace on one key: a random policy, and requests
// of every op at times that step forward, jump and step back. It keeps
// the states package algorithm gives, to check the store's decisions.
type trace struct {
	rng          *rand.Rand
	prefix, key  string
	limits       []sluice.Limit
	states       [][]int64
	takes        []taken
	period       time.Duration
	step         int64 // µs
	now          time.Time
	steps, stepN int
	oneLimit     bool // one GCRA limit or fixed window, takes and peeks only: what a Limiter or a rule asks
}

// taken is an allowed take a later step may refund.
type taken struct {
	at   time.Time
	cost int
}

// newTrace returns the trace of seed; of one GCRA limit or fixed window,
// with takes and peeks only, if oneLimit.
func newTrace(seed uint64, prefix string, steps int, oneLimit bool) *trace {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	limits := randomPolicy(rng)
	if oneLimit {
		limits = []sluice.Limit{randomLimit(rng, []sluice.Algorithm{sluice.GCRA, sluice.FixedWindow}[rng.IntN(2)])}
	}
	tr := &trace{rng: rng, prefix: prefix, key: fmt.Sprintf("k{%d}\x00}", seed), limits: limits, steps: steps, oneLimit: oneLimit}
	tr.states = make([][]int64, len(limits))
	for i, l := range limits {
		tr.states[i] = make([]int64, algorithm.Words(l))
	}
	tr.period = maxPeriod(limits)
	tr.step = max(int64(tr.period)/int64(10*limits[0].Rate)/1000, 1)
	tr.now = t0.Add(time.Duration(rng.Int64N(1e9)) * time.Microsecond)
	return tr
}

// next returns the trace's next request; done reports the trace is over.
func (tr *trace) next() (r sluice.Request, done bool) {
	if tr.stepN == tr.steps {
		return sluice.Request{}, true
	}
	tr.stepN++
	rng, period := tr.rng, tr.period
	switch r := rng.IntN(100); {
	case r < 3:
		tr.now = tr.now.Add(time.Duration(rng.Int64N(int64(period)/1000*3+1)) * time.Microsecond) // jump
	case r < 8:
		tr.now = tr.now.Add(-time.Duration(rng.Int64N(int64(period)/1000+1)) * time.Microsecond) // back
	default:
		tr.now = tr.now.Add(time.Duration(rng.Int64N(tr.step*2+1)) * time.Microsecond)
	}
	cost := 1 + rng.IntN(min(minBurst(tr.limits), 4))
	if rng.IntN(10) == 0 {
		cost = 1 + rng.IntN(minBurst(tr.limits))
	}
	req := sluice.Request{Prefix: tr.prefix, Key: tr.key, Limits: tr.limits, Cost: cost, Now: tr.now}
	switch r := rng.IntN(100); {
	case tr.oneLimit:
		if r < 15 {
			req.Op = sluice.OpPeek
		}
	case r < 15:
		req.Op = sluice.OpPeek
	case r < 25 && len(tr.takes) > 0:
		k := rng.IntN(len(tr.takes))
		req.Op, req.At, req.Cost = sluice.OpRefund, tr.takes[k].at, tr.takes[k].cost
		tr.takes = append(tr.takes[:k], tr.takes[k+1:]...)
	case r < 27:
		req.Op = sluice.OpReset
	case r < 35:
		req.Op = sluice.OpInsert
		if rng.IntN(2) == 0 {
			req.Cost = -req.Cost // a reward
		}
	}
	return req, false
}

// check compares the store's answer to req, the trace's last request,
// with the reference's, and counts it in st.
func (tr *trace) check(req sluice.Request, got sluice.Decision, err error, st *traceStats) error {
	if err != nil {
		return fmt.Errorf("step %d: Decide(%v cost %d) = %w", tr.stepN, req.Op, req.Cost, err)
	}
	want := reference(tr.limits, tr.states, tr.prefix+tr.key, req)
	if got != want {
		return fmt.Errorf("step %d: %v of %d at +%v under %v:\n got  %+v\n want %+v",
			tr.stepN, req.Op, req.Cost, req.Now.Sub(t0), tr.limits, got, want)
	}
	switch req.Op {
	case sluice.OpTake, sluice.OpPeek:
		if got.Allowed {
			st.allowed.Add(1)
		} else {
			st.denied.Add(1)
		}
		if req.Op == sluice.OpTake && got.Allowed {
			tr.takes = append(tr.takes, taken{req.Now, req.Cost})
		}
	case sluice.OpRefund:
		st.refunds.Add(1)
	case sluice.OpReset:
		st.resets.Add(1)
		tr.takes = tr.takes[:0]
	case sluice.OpInsert:
		st.inserts.Add(1)
	}
	return nil
}

// runTrace plays one random trace against s, one Decide per request, and
// reports the first difference from package algorithm.
func runTrace(ctx context.Context, s *Store, seed uint64, prefix string, steps int, st *traceStats) error {
	tr := newTrace(seed, prefix, steps, false)
	for {
		req, done := tr.next()
		if done {
			return nil
		}
		got, err := s.Decide(ctx, req)
		if err := tr.check(req, got, err, st); err != nil {
			return err
		}
	}
}

// runTraces plays traces of the given seeds side by side, each step of
// every trace in one DecideBatch, and reports each trace's first
// difference from package algorithm.
func runTraces(ctx context.Context, s *Store, seeds []uint64, prefix string, steps int, oneLimit bool, st *traceStats) []error {
	trs := make([]*trace, len(seeds))
	for i, seed := range seeds {
		trs[i] = newTrace(seed, prefix, steps, oneLimit)
	}
	failed := make([]error, len(trs))
	rs := make([]sluice.Request, len(trs))
	for range steps {
		for i, tr := range trs {
			rs[i], _ = tr.next()
		}
		ds, errs := s.DecideBatch(ctx, rs)
		for i, tr := range trs {
			if failed[i] == nil {
				if err := tr.check(rs[i], ds[i], errs[i], st); err != nil {
					failed[i] = fmt.Errorf("seed %d: %w", seeds[i], err)
				}
			}
		}
	}
	var errs []error
	for _, err := range failed {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// reference applies r to states, the states of name under r.Limits, as
// package algorithm does, and returns the decision a store must give:
// for a refund, a peek of its cost just after; for a reset or an insert,
// a peek of 1.
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
	case sluice.OpInsert:
		algorithm.InsertAll(limits, states, name, n, r.Cost)
		op, cost = sluice.OpPeek, 1
	}
	d := algorithm.Decide(limits, states, name, n, cost, op)
	d.Time = r.Now
	return d
}

// TestDifferential checks that the script gives exactly the decisions of
// package algorithm on thousands of random traces: every algorithm,
// multi-limit policies, costs, peeks, refunds, resets, inserts and a clock that
// jumps and steps back.
func TestDifferential(t *testing.T) {
	traces, steps := *traceCount, 60
	if testing.Short() {
		traces = 200
	}
	// Keys expire by the wall clock, TTLSlack after the trace time their
	// state needs: a slow run (batches of many traces from 16 goroutines
	// on a busy machine) that steps back in trace time must still find
	// them.
	s := newStore(t, Config{TTLSlack: time.Minute})
	ctx := context.Background()
	t.Run("decide", func(t *testing.T) {
		prefix := uniquePrefix(t)
		differential(t, traces, 1, func(seeds []uint64, st *traceStats) []error {
			if err := runTrace(ctx, s, seeds[0], prefix, steps, st); err != nil {
				return []error{fmt.Errorf("seed %d: %w", seeds[0], err)}
			}
			return nil
		})
	})
	// The same through DecideBatch: batches of 16 and of 70 requests of
	// as many traces (70 takes two script calls).
	for _, size := range []int{16, maxPerCall + 6} {
		t.Run(fmt.Sprintf("batch/%d", size), func(t *testing.T) {
			prefix := uniquePrefix(t)
			differential(t, traces, size, func(seeds []uint64, st *traceStats) []error {
				return runTraces(ctx, s, seeds, prefix, steps, false, st)
			})
		})
	}
	// Batches of Limiters' and rules' requests, one GCRA limit or fixed
	// window each, takes and peeks: the script decides them in one pass
	// (one_pass in batch.lua).
	t.Run("batch/onelimit", func(t *testing.T) {
		prefix := uniquePrefix(t)
		differential(t, traces, 16, func(seeds []uint64, st *traceStats) []error {
			return runTraces(ctx, s, seeds, prefix, steps, true, st)
		})
	})
}

// differential plays traces, size at a time, from 16 goroutines, and
// fails t with the first few failing traces.
func differential(t *testing.T, traces, size int, play func(seeds []uint64, st *traceStats) []error) {
	t.Helper()
	var (
		mu    sync.Mutex
		fails []error
		wg    sync.WaitGroup
		st    traceStats
	)
	groups := make(chan []uint64)
	for range 16 {
		wg.Go(func() {
			for seeds := range groups {
				if errs := play(seeds, &st); len(errs) > 0 {
					mu.Lock()
					fails = append(fails, errs...)
					mu.Unlock()
				}
			}
		})
	}
	for first := 0; first < traces; first += size {
		seeds := make([]uint64, 0, size)
		for seed := first; seed < min(first+size, traces); seed++ {
			seeds = append(seeds, uint64(seed))
		}
		groups <- seeds
	}
	close(groups)
	wg.Wait()
	t.Logf("%d traces: %d allowed, %d denied, %d refunds, %d resets, %d inserts",
		traces, st.allowed.Load(), st.denied.Load(), st.refunds.Load(), st.resets.Load(), st.inserts.Load())
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
