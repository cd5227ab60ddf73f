package algorithm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestSummaryRoundTrip checks that one actor's state, summarised and
// charged back to it, is judged as the state itself from the time it was
// written on, but for the sliding log, whose units move at most one
// summary bucket later.
func TestSummaryRoundTrip(t *testing.T) {
	sec := int64(time.Second)
	tests := []struct {
		name  string
		l     sluice.Limit
		takes []int64 // times of takes of 1, from t0
		want  []int64 // the state Charge rebuilds
	}{
		{"gcra", sluice.Limit{Rate: 10, Period: time.Second}, []int64{0, 0, 0}, []int64{t0 + 3*sec/10}},
		{"fixed", sluice.Limit{Rate: 10, Period: time.Second, Algorithm: sluice.FixedWindow}, []int64{0, sec / 2}, []int64{t0 / sec, 2}},
		{"sliding", sluice.Limit{Rate: 10, Period: time.Second, Algorithm: sluice.SlidingWindow, Buckets: 2}, []int64{0, sec / 2, sec / 2}, nil},
		// Ten buckets of 100 ms in coarse buckets of three, t0's bucket
		// i0 first of its coarse bucket: units at i0 and i0+1 move to
		// i0+2; the unit at i0+4 stays, the newest.
		{"sliding coarse", sluice.Limit{Rate: 10, Period: time.Second, Algorithm: sluice.SlidingWindow}, []int64{0, sec / 10, 4 * sec / 10},
			slidingState(10, t0/(sec/10)+4, map[int64]int64{t0/(sec/10) + 2: 2, t0/(sec/10) + 4: 1})},
		{"log", sluice.Limit{Rate: 3, Period: 4 * time.Second, Algorithm: sluice.SlidingLog}, []int64{0, sec / 2, 3 * sec / 2},
			// Buckets of one second: units at 0 and 0.5 s move to the end
			// of the first second; the newest stays at 1.5 s.
			[]int64{0, t0 + sec - 1, t0 + sec - 1, t0 + 3*sec/2}},
		{"log oldest bucket", sluice.Limit{Rate: 3, Period: 16 * time.Second, Algorithm: sluice.SlidingLog}, []int64{0, 15 * sec, 16*sec + sec/5},
			// Buckets of 4 s. Sixteen seconds on, the unit of the oldest
			// bucket still counts until that bucket's end.
			[]int64{0, t0 + 4*sec - 1, t0 + 16*sec - 1, t0 + 16*sec + sec/5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := make([]int64, Words(tt.l))
			for _, at := range tt.takes {
				if !Take(tt.l, s, t0+at, 1).Allowed {
					t.Fatalf("take at %d denied", at)
				}
			}
			sum := make([]int64, SummaryWords(tt.l))
			Summarize(tt.l, sum, s, "k")
			got := make([]int64, Words(tt.l))
			Charge(tt.l, got, sum, "k")
			if tt.want == nil {
				tt.want = slices.Clone(s) // exact
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Charge(Summarize(%v)) = %v, want %v", s, got, tt.want)
			}
		})
	}
}

// slidingState returns the state of a sliding window counter of g
// buckets whose newest is top, holding counts.
func slidingState(g, top int64, counts map[int64]int64) []int64 {
	s := make([]int64, g+2)
	s[0] = top
	for i, c := range counts {
		s[slot(g, i)] = c
	}
	return s
}

// TestSummaryJoinMeet checks Join and Meet on hand-made summaries.
func TestSummaryJoinMeet(t *testing.T) {
	fixed := sluice.Limit{Rate: 10, Period: time.Second, Algorithm: sluice.FixedWindow}
	sliding := sluice.Limit{Rate: 10, Period: time.Second, Algorithm: sluice.SlidingWindow, Buckets: 2}
	gcra := sluice.Limit{Rate: 10, Period: time.Second}
	tests := []struct {
		name       string
		l          sluice.Limit
		a, b       []int64
		t          int64
		join, meet []int64
	}{
		{"gcra", gcra, []int64{5}, []int64{9}, 0, []int64{9}, []int64{5}},
		{"fixed both open", fixed, []int64{100, 100, 3}, []int64{90, 95, 7}, 50, []int64{90, 100, 7}, []int64{0, 0, 0}},
		{"fixed overlapping", fixed, []int64{80, 100, 3}, []int64{90, 120, 7}, 50, []int64{80, 120, 7}, []int64{90, 100, 3}},
		{"fixed one ended", fixed, []int64{100, 100, 3}, []int64{40, 40, 7}, 50, []int64{100, 100, 3}, []int64{0, 0, 0}},
		{"fixed ends before t dropped", fixed, []int64{40, 100, 3}, []int64{90, 90, 7}, 50, []int64{51, 100, 7}, []int64{90, 90, 3}},
		{"fixed one empty", fixed, []int64{100, 100, 3}, []int64{0, 0, 0}, 50, []int64{100, 100, 3}, []int64{0, 0, 0}},
		// Summaries of two buckets: w = 1, a ring of 4 coarse buckets,
		// bucket i in slot 1+i%4. a (newest 12) holds 10:3 11:1 12:2, b
		// (newest 11) holds 9:2 10:4 11:5.
		{"sliding", sliding, []int64{12, 2, 0, 3, 1}, []int64{11, 0, 2, 4, 5}, 0,
			// Join under 12: 9:2 10:4 11:5 12:2.
			[]int64{12, 2, 2, 4, 5},
			// Meet under 11: 8:0 (only b reaches 8), 9:0 10:3 11:1.
			[]int64{11, 0, 0, 3, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := slices.Clone(tt.a)
			Join(tt.l, j, tt.b, tt.t)
			if !slices.Equal(j, tt.join) {
				t.Errorf("Join(%v, %v) = %v, want %v", tt.a, tt.b, j, tt.join)
			}
			m := slices.Clone(tt.a)
			Meet(tt.l, m, tt.b)
			if !slices.Equal(m, tt.meet) {
				t.Errorf("Meet(%v, %v) = %v, want %v", tt.a, tt.b, m, tt.meet)
			}
		})
	}
}

// TestSummaryNeverOverAdmits is the property the memory store relies on:
// actors are forgotten at random into a small sketch of two rows of
// shared cells, and charged from the meet of their cells when they come
// back; the store's state never admits a take that the exact state of
// the takes it admitted (what unbounded memory would hold) denies. Times
// run forwards, with up to a tenth of a period of jitter per actor; the
// costs and the rates vary, as the sketch is shared by a limit's Rates.
func TestSummaryNeverOverAdmits(t *testing.T) {
	for _, l := range testLimits {
		t.Run(l.String(), func(t *testing.T) {
			for seed := range uint64(20) {
				checkSummaries(t, l, seed)
			}
		})
	}
}

func checkSummaries(t *testing.T, l sluice.Limit, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, uint64(l.StateID())))
	const actors, width = 12, 3
	type actor struct {
		key     string
		held    []int64 // the store's state; nil while forgotten
		exact   []int64 // the state of the takes the store admitted
		cells   [2]int  // the cell of each row
		last    int64   // the actor's latest request time
		evicted bool
	}
	sw := SummaryWords(l)
	cells := make([][]int64, 2*width)
	for i := range cells {
		cells[i] = make([]int64, sw)
	}
	as := make([]*actor, actors)
	for i := range as {
		as[i] = &actor{key: fmt.Sprint("actor-", i), exact: make([]int64, Words(l)), held: make([]int64, Words(l)),
			cells: [2]int{rng.IntN(width), width + rng.IntN(width)}}
	}
	sum := make([]int64, sw)
	step := int64(l.Period) / int64(l.Rate) / 3
	now := t0
	for i := range 4000 {
		now += rng.Int64N(step + 1)
		a := as[rng.IntN(actors)]
		switch rng.IntN(8) {
		case 0: // forget a, as an eviction: join its summary into its cells
			if a.held == nil {
				continue
			}
			Summarize(l, sum, a.held, a.key)
			for _, c := range a.cells {
				Join(l, cells[c], sum, now-int64(l.Period)/10)
			}
			a.held, a.evicted = nil, true
			continue
		}
		if a.held == nil { // back: charge it from the meet of its cells
			m := slices.Clone(cells[a.cells[0]])
			Meet(l, m, cells[a.cells[1]])
			a.held = make([]int64, Words(l))
			Charge(l, a.held, m, a.key)
		}
		at := max(now-rng.Int64N(int64(l.Period)/10+1), a.last)
		a.last = at
		cost := 1 + rng.IntN(l.MaxBurst())
		off := Offset(l, a.key)
		d := Take(l, a.held, at-off, cost)
		if d.Allowed {
			if !Check(l, a.exact, at-off, cost).Allowed {
				t.Fatalf("seed %d step %d: %s (evicted before: %v) admitted %d at %d, which its exact state %v denies (store state before: charged)",
					seed, i, a.key, a.evicted, cost, at, a.exact)
			}
			Commit(l, a.exact, at-off, cost)
		}
	}
}

// TestFixedCharge checks which of its own windows a key is charged in
// from a fixed window's summary: the one whose end the summary's
// interval holds, none if it holds no end of the key's, and when the
// interval spans a Period or more, the window holding its last end.
func TestFixedCharge(t *testing.T) {
	l := sluice.Limit{Rate: 10, Period: time.Second, Algorithm: sluice.FixedWindow, Staggered: true}
	p, off := int64(l.Period), Offset(l, "k")
	i := (t0 - off) / p // a window of the key, ending at e
	e := (i+1)*p + off
	tests := []struct {
		name string
		sum  []int64
		want []int64
	}{
		{"its own end", []int64{e, e, 5}, []int64{i, 5}},
		{"an interval holding it", []int64{e - p/2, e + p/3, 5}, []int64{i, 5}},
		{"an interval missing it", []int64{e + 1, e + p/2, 5}, []int64{0, 0}},
		{"a wide interval", []int64{e - 2*p, e + p, 5}, []int64{i + 1, 5}},
		{"empty", []int64{0, 0, 0}, []int64{0, 0}},
	}
	for _, tt := range tests {
		s := make([]int64, 2)
		Charge(l, s, tt.sum, "k")
		if !slices.Equal(s, tt.want) {
			t.Errorf("%s: Charge(%v) = %v, want %v", tt.name, tt.sum, s, tt.want)
		}
	}
}
