package memory

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// ledgerLimits are limits of every algorithm, with rates that pack their
// counts in few bits and in many.
var ledgerLimits = []sluice.Limit{
	{Rate: 10, Period: time.Second},
	{Rate: 7, Period: time.Minute, Burst: 20},
	{Rate: 10, Period: time.Second, Algorithm: sluice.FixedWindow},
	{Rate: 10, Period: time.Second, Algorithm: sluice.FixedWindow, Staggered: true},
	{Rate: 10, Period: time.Second, Algorithm: sluice.SlidingWindow},
	{Rate: 3000, Period: time.Second, Algorithm: sluice.SlidingWindow, Buckets: 4},
	{Rate: 10, Period: time.Second, Algorithm: sluice.ApproxSlidingWindow, Buckets: 3},
	{Rate: 10, Period: time.Second, Algorithm: sluice.SlidingLog},
	{Rate: 2, Period: time.Minute, Algorithm: sluice.SlidingLog},
}

// TestLedgerNeverOverAdmits is the property the store relies on: actors
// are forgotten at random into a ledger too small for them all (so that
// entries are folded into its cells), which is now and then resized up
// and down, and recalled when they come back, dropped from the ledger as
// the store drops them once held again; the state recalled never admits
// a take that the exact state of the takes admitted (what unbounded
// memory would hold) denies. Times run forwards, with up to a tenth of a
// period of jitter per actor; costs vary.
func TestLedgerNeverOverAdmits(t *testing.T) {
	for _, l := range ledgerLimits {
		t.Run(l.String(), func(t *testing.T) {
			for seed := range uint64(10) {
				checkLedger(t, l, seed)
			}
		})
	}
}

// ledgerActor is an actor of checkLedger.
type ledgerActor struct {
	key     string
	f       fp
	held    []int64 // the store's state; nil while forgotten
	exact   []int64 // the state of the takes the store admitted
	last    int64   // the actor's latest request time
	evicted bool
}

func checkLedger(t *testing.T, l sluice.Limit, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, uint64(l.StateID())))
	now := t0.UnixNano()
	g := newLedger(kindOf(&l), l, 1, 2, now)
	as := make([]*ledgerActor, 40)
	for i := range as {
		as[i] = &ledgerActor{key: fmt.Sprint("actor-", i), f: fingerprint(rng.Uint64()),
			exact: make([]int64, algorithm.Words(l)), held: make([]int64, algorithm.Words(l))}
	}
	step := int64(l.Period) / int64(l.Rate) / 3
	jitter := int64(l.Period) / 10
	for i := range 6000 {
		now += rng.Int64N(step + 1)
		judged := now - jitter // as a store judges evictions sweepLag back
		a := as[rng.IntN(len(as))]
		switch rng.IntN(10) {
		case 0: // forget a, as an eviction
			if a.held != nil {
				if !idle(g.kind, a.held, judged) {
					g.add(a.held, a.key, a.f, judged, nil)
				}
				a.held, a.evicted = nil, true
			}
			continue
		case 1: // resize, as a shard shares its budget
			g.resize(max(1, g.n+rng.IntN(5)-2), judged)
			continue
		}
		if a.held == nil { // back: recalled, and held again
			a.held = make([]int64, algorithm.Words(l))
			g.recall(l, a.held, a.key, a.f, false, now)
			g.forget(a.f)
		}
		at := max(now-rng.Int64N(jitter+1), a.last)
		a.last = at
		cost := 1 + rng.IntN(l.MaxBurst())
		off := algorithm.Offset(l, a.key)
		if d := algorithm.Take(l, a.held, at-off, cost); d.Allowed {
			if !algorithm.Check(l, a.exact, at-off, cost).Allowed {
				t.Fatalf("seed %d step %d: %s (evicted before: %v) admitted %d at %d, which its exact state %v denies",
					seed, i, a.key, a.evicted, cost, at, a.exact)
			}
			algorithm.Commit(l, a.exact, at-off, cost)
		}
	}
}

// TestLedgerRecallsExactly checks that an actor evicted into a ledger with
// room is charged its own state when it comes back: a GCRA tat rounded
// up by less than gcraUnit, a fixed window as it was, the sliding ones
// as their summary (algorithm.Summarize) charges them.
func TestLedgerRecallsExactly(t *testing.T) {
	for _, l := range ledgerLimits {
		t.Run(l.String(), func(t *testing.T) {
			now := t0.UnixNano()
			g := newLedger(kindOf(&l), l, 0, 64, now)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range 100 {
				key := "k" + strconv.Itoa(i)
				s := make([]int64, algorithm.Words(l))
				for range 1 + rng.IntN(l.MaxBurst()) {
					algorithm.Take(l, s, now-algorithm.Offset(l, key)+rng.Int64N(int64(l.Period)/2), 1)
				}
				f := fingerprint(rng.Uint64())
				g.add(s, key, f, now, nil)
				got := make([]int64, len(s))
				if g.recall(l, got, key, f, true, now) {
					t.Fatalf("recall(%s) marked an estimate", key)
				}
				want := slices.Clone(s)
				switch l.Algorithm {
				case sluice.GCRA:
					if d := got[0] - s[0]; d < 0 || d >= gcraUnit(l) {
						t.Errorf("recall(%s) = tat %d, want %d rounded up by less than %d", key, got[0], s[0], gcraUnit(l))
					}
					continue
				case sluice.SlidingWindow, sluice.ApproxSlidingWindow, sluice.SlidingLog:
					sum := make([]int64, algorithm.SummaryWords(l))
					algorithm.Summarize(l, sum, s, key)
					if grain := algorithm.SummaryGrain(l); grain > 1 {
						// A log's newest unit moves to the end of its
						// coarse bucket, as the older ones do.
						sum[0] = (sum[0]/grain+1)*grain - 1
					}
					clear(want)
					algorithm.Charge(l, want, sum, key)
				}
				if !slices.Equal(got, want) {
					t.Errorf("recall(%s) = %v, want %v (state %v)", key, got, want, s)
				}
			}
		})
	}
}

// TestLedgerRecallEstimates checks when a recall is an estimate: a key
// the ledger holds by fingerprint is charged its own entry, not an
// estimate; a key it does not hold is charged from its cells, an
// estimate if they hold anything, unless own (then it is fresh, but
// reported as one the cells may hold); an unknown key of an empty
// ledger is fresh.
func TestLedgerRecallEstimates(t *testing.T) {
	l := sluice.Limit{Rate: 1, Period: time.Hour}
	now := t0.UnixNano()
	g := newLedger(kindOf(&l), l, 0, 1, now)
	spent := []int64{now + int64(time.Hour)}
	fresh := func(f fp, own bool) ([]int64, bool) {
		s := []int64{0}
		est := g.recall(l, s, "", f, own, now)
		return s, est
	}
	if s, est := fresh(5, false); s[0] != 0 || est {
		t.Errorf("recall of a key of an empty ledger = %v, %v; want fresh", s, est)
	}
	// One bucket of 7: the eighth entry folds the first into the cell.
	for f := range fp(8) {
		g.add(spent, "", f+1, now, nil)
	}
	if s, est := fresh(2, false); s[0] < spent[0] || est {
		t.Errorf("recall of a held key = %v, %v; want %v, no estimate", s, est, spent)
	}
	if s, est := fresh(99, false); s[0] < spent[0] || !est {
		t.Errorf("recall of an unknown key = %v, %v; want %v from the cells, an estimate", s, est, spent)
	}
	if s, est := fresh(99, true); s[0] != 0 || !est {
		t.Errorf("recall of an unknown key, own only = %v, %v; want fresh, reported as perhaps forgotten", s, est)
	}
}

// TestLedgerSharesBudget checks that the ledgers of a shard share its
// budget: the ledger of one prefix grows to it, and a second prefix's
// takes room by halving the first, but no further than a fair share;
// every evicted actor of both is charged what it spent.
func TestLedgerSharesBudget(t *testing.T) {
	s, room := capStoreOf(t, "", 64<<10)
	budget := s.ledgerBudget
	hourly := []sluice.Limit{{Rate: 10, Period: time.Hour}}
	n := 6 * room
	for i := range n {
		mustDecide(t, s, sluice.Request{Prefix: "a:", Key: key(i), Limits: hourly, Cost: 9, Now: t0})
	}
	first := s.ledgerBytes.Load()
	if first == 0 || first > budget {
		t.Fatalf("one ledger counts %d bytes, want some, at most %d", first, budget)
	}
	for i := range n {
		mustDecide(t, s, sluice.Request{Prefix: "b:", Key: key(i), Limits: hourly, Cost: 9, Now: t0})
	}
	tb := s.shards[0].tables[0]
	if len(tb.ledgers) != 2 {
		t.Fatalf("%d ledgers, want one per prefix", len(tb.ledgers))
	}
	a, b := tb.ledgerOf(1).bytes(), tb.ledgerOf(2).bytes()
	if a+b > budget || a > 2*b || b > 2*a {
		t.Errorf("ledgers count %d and %d bytes: want within a factor 2, at most %d in all", a, b, budget)
	}
	for _, prefix := range []string{"a:", "b:"} {
		for i := range n {
			if d := mustDecide(t, s, sluice.Request{Prefix: prefix, Key: key(i), Limits: hourly, Op: sluice.OpPeek, Cost: 2, Now: t0}); d.Allowed {
				t.Errorf("peek(%s%s, 2 of the 1 left) allowed", prefix, key(i))
			}
		}
	}
}

// TestLedgerLapses checks that a sweep lets go of a ledger once every
// state it remembers is back to empty, and of its table once empty too.
func TestLedgerLapses(t *testing.T) {
	s, room := capStore(t)
	hourly := []sluice.Limit{{Rate: 1, Period: time.Hour}}
	for i := range 2 * room {
		mustDecide(t, s, sluice.Request{Key: key(i), Limits: hourly, Cost: 1, Now: t0})
	}
	if s.ledgerBytes.Load() == 0 {
		t.Fatal("no ledger after evictions of states over their limit")
	}
	s.sweep()
	if s.ledgerBytes.Load() == 0 {
		t.Fatal("a sweep let go of a ledger that still charges")
	}
	// A request two hours on moves the shard's time: then all is empty.
	mustDecide(t, s, sluice.Request{Key: "other", Limits: []sluice.Limit{{Rate: 1, Period: time.Second}}, Op: sluice.OpPeek, Cost: 1, Now: t0.Add(2 * time.Hour)})
	s.sweep()
	if got, n := s.Bytes(), len(s.shards[0].tables); got != 0 || n != 0 {
		t.Errorf("after the sweep two hours on: Bytes() = %d, %d tables; want 0, 0", got, n)
	}
}

// TestLedgerSafeToForget checks that a key the store evicted is charged
// its own state, not an estimate, whether or not it is safe to forget;
// that once the ledger folds entries into its cells, a key it no longer
// holds is charged from them, its denial an estimate, unless its request
// marks it safe to forget: then it starts fresh, for a collision in the
// cells must not grant a privilege (or ban an innocent).
func TestLedgerSafeToForget(t *testing.T) {
	for _, alg := range []sluice.Algorithm{sluice.GCRA, sluice.FixedWindow, sluice.SlidingLog} {
		t.Run(alg.String(), func(t *testing.T) {
			s, room := capStore(t)
			hourly := []sluice.Limit{{Rate: 1, Period: time.Hour, Algorithm: alg}}
			n := 12 * room // more than the ledger holds: some in the cells
			for i := range n {
				mustDecide(t, s, sluice.Request{Key: key(i), Limits: hourly, Cost: 1, Now: t0})
			}
			fresh, estimates := 0, 0
			for i := range n {
				r := sluice.Request{Key: key(i), Limits: hourly, Op: sluice.OpPeek, Cost: 1, Now: t0, SafeToForget: true}
				d := mustDecide(t, s, r)
				if d.Estimated {
					t.Errorf("%s safe to forget: denial marked Estimated", r.Key)
				}
				if !d.Allowed {
					if d.Forgotten {
						t.Errorf("%s safe to forget, held or remembered: marked Forgotten", r.Key)
					}
					continue // held, or remembered exactly: spent
				}
				if !d.Forgotten {
					t.Errorf("%s safe to forget, folded into the cells: %+v, want Forgotten", r.Key, d)
				}
				fresh++
				r.SafeToForget = false
				if d := mustDecide(t, s, r); d.Allowed || !d.Estimated {
					t.Errorf("evicted %s, spent: %+v, want an Estimated denial, charged from the cells", r.Key, d)
				} else {
					estimates++
				}
			}
			if fresh == 0 || fresh > n-room {
				t.Errorf("%d of %d keys fresh when safe to forget, want some, at most the %d folded into cells", fresh, n, n-room)
			}
			t.Logf("%d of %d keys folded into the cells", estimates, n)
		})
	}
}

// TestLedgerKeepsRulesApart is the flood of issue 31 in small: a store
// at its cap takes a flood of distinct keys of one rule, each spending
// its whole allowance, far more than it remembers; fresh actors of
// another rule with the same limit are then all allowed, and actors of
// that rule the flood evicted are charged what they spent, exactly.
func TestLedgerKeepsRulesApart(t *testing.T) {
	s := New(Config{MaxBytes: 1 << 20, SweepInterval: -1})
	defer s.Close()
	l := []sluice.Limit{{Rate: 3, Period: time.Hour}}
	take := func(prefix, key string, op sluice.Op, now time.Time) sluice.Decision {
		return mustDecide(t, s, sluice.Request{Prefix: prefix, Key: key, Limits: l, Op: op, Cost: 1, Now: now})
	}
	now := t0
	for i := range 200 { // login's users, each with one attempt left
		take("sluice:login:", "user-"+strconv.Itoa(i), sluice.OpTake, now)
		take("sluice:login:", "user-"+strconv.Itoa(i), sluice.OpTake, now)
	}
	for i := range 300_000 {
		k := "attacker-" + strconv.Itoa(i)
		for range 3 {
			take("sluice:strict:", k, sluice.OpTake, now)
		}
		now = now.Add(time.Microsecond)
	}
	for i := range 1000 {
		if d := take("sluice:login:", "fresh-"+strconv.Itoa(i), sluice.OpTake, now); !d.Allowed {
			t.Fatalf("fresh actor %d of another rule refused after the flood: %+v", i, d)
		}
	}
	for i := range 200 {
		k := "user-" + strconv.Itoa(i)
		if d := take("sluice:login:", k, sluice.OpPeek, now); !d.Allowed || d.Remaining != 0 || d.Estimated {
			t.Errorf("peek(%s) after the flood = %+v, want allowed with 0 left (one of 3 left), not estimated", k, d)
		}
	}
}
