package accuracy

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

var t0 = Start.UnixNano()

const ms = int64(time.Millisecond)

// step is one call on an oracle: admit, or ask whether cost would pass.
type step struct {
	at    int64 // since t0
	cost  int
	admit bool
	want  bool // for a question
}

func runOracle(t *testing.T, l sluice.Limit, key string, steps []step) {
	t.Helper()
	o, err := newOracle(l, key)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range steps {
		if s.admit {
			o.admit(t0+s.at, s.cost)
			continue
		}
		if got := o.allows(t0+s.at, s.cost); got != s.want {
			t.Errorf("%v step %d: allows(+%v, %d) = %v, want %v", l, i, time.Duration(s.at), s.cost, got, s.want)
		}
	}
}

func TestOracles(t *testing.T) {
	tests := []struct {
		name  string
		l     sluice.Limit
		steps []step
	}{
		{"token bucket refills one token per interval", sluice.Limit{Rate: 2, Period: time.Second}, []step{
			{at: 0, cost: 2, want: true},
			{at: 0, cost: 3, want: false},
			{at: 0, cost: 2, admit: true},
			{at: 0, cost: 1, want: false},
			{at: 500*ms - 1, cost: 1, want: false},
			{at: 500 * ms, cost: 1, want: true},
			{at: 1000 * ms, cost: 2, want: true},
			{at: 10000 * ms, cost: 3, want: false}, // never more than the burst
		}},
		{"token bucket with a burst under the rate", sluice.Limit{Rate: 10, Period: time.Second, Burst: 1}, []step{
			{at: 0, cost: 1, admit: true},
			{at: 99 * ms, cost: 1, want: false},
			{at: 100 * ms, cost: 1, want: true},
		}},
		{"token bucket keeps fractions of a token", sluice.Limit{Rate: 3, Period: time.Second, Burst: 1}, []step{
			{at: 0, cost: 1, admit: true},
			{at: 333333333, cost: 1, want: false},
			{at: 333333334, cost: 1, want: true}, // 1/3 s, rounded up
			{at: 333333334, cost: 1, admit: true},
			{at: 666666667, cost: 1, want: false}, // 1/3 s after the take
			{at: 666666668, cost: 1, want: true},
		}},
		{"sliding window of (t-P, t]", sluice.Limit{Rate: 2, Period: time.Second, Algorithm: sluice.SlidingLog}, []step{
			{at: 0, cost: 1, admit: true},
			{at: 500 * ms, cost: 1, admit: true},
			{at: 999 * ms, cost: 1, want: false},
			{at: 1000 * ms, cost: 1, want: true},
			{at: 1000 * ms, cost: 2, want: false},
			{at: 1500 * ms, cost: 2, want: true},
		}},
		{"fixed windows aligned to the epoch", sluice.Limit{Rate: 2, Period: time.Second, Algorithm: sluice.FixedWindow}, []step{
			{at: 900 * ms, cost: 2, admit: true},
			{at: 999 * ms, cost: 1, want: false},
			{at: 1000 * ms, cost: 2, want: true},
			{at: 1000 * ms, cost: 3, want: false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runOracle(t, tt.l, "k", tt.steps) })
	}
}

// TestStaggerOffset checks the oracle's own offset against the one
// package algorithm uses: two implementations of the documented hash.
func TestStaggerOffset(t *testing.T) {
	l := sluice.Limit{Rate: 10, Period: time.Minute, Algorithm: sluice.FixedWindow, Staggered: true}
	for _, key := range []string{"", "actor", "203.0.113.7", "user:λ", "\x00\xff"} {
		if got, want := staggerOffset(l, key), algorithm.Offset(l, key); got != want {
			t.Errorf("staggerOffset(%q) = %d, want %d", key, got, want)
		}
	}
	l.Staggered = false
	if got := staggerOffset(l, "actor"); got != 0 {
		t.Errorf("staggerOffset of an unstaggered limit = %d, want 0", got)
	}
}

func TestMaxInWindow(t *testing.T) {
	tests := []struct {
		u      units
		period int64
		want   int
	}{
		{nil, 5, 0},
		{units{3}, 5, 1},
		{units{0, 1, 1, 4, 5, 9}, 5, 4},   // (0, 5] holds 1, 1, 4, 5
		{units{0, 5, 10, 15}, 5, 1},       // windows are half open
		{units{0, 5, 5, 5, 10, 15}, 6, 4}, // (−1, 5]
		{units{7, 7, 7, 7}, 1, 4},
	}
	for _, tt := range tests {
		if got := maxInWindow(tt.u, tt.period); got != tt.want {
			t.Errorf("maxInWindow(%v, %d) = %d, want %d", tt.u, tt.period, got, tt.want)
		}
	}
}

// TestBoundViolations checks that the bound checks catch what they must:
// each case is one unit too many for its algorithm's stated bound.
func TestBoundViolations(t *testing.T) {
	sec := int64(time.Second)
	at := func(offsets ...int64) units {
		u := make(units, len(offsets))
		for i, o := range offsets {
			u[i] = t0 + o
		}
		return u
	}
	repeat := func(t int64, n int) []int64 {
		var u []int64
		for range n {
			u = append(u, t)
		}
		return u
	}
	tests := []struct {
		name string
		l    sluice.Limit
		u    units
		want int
	}{
		{"gcra burst at once", sluice.Limit{Rate: 2, Period: time.Second, Burst: 3}, at(0, 0, 0), 0},
		{"gcra over burst at once", sluice.Limit{Rate: 2, Period: time.Second, Burst: 3}, at(0, 0, 0, 0), 1},
		{"gcra burst then one per interval", sluice.Limit{Rate: 2, Period: time.Second, Burst: 3}, at(0, 0, 0, sec/2, sec), 0},
		{"gcra one early", sluice.Limit{Rate: 2, Period: time.Second, Burst: 3}, at(0, 0, 0, sec/2, sec-1), 1},
		{"fixed 2×rate across a boundary", sluice.Limit{Rate: 2, Period: time.Second, Algorithm: sluice.FixedWindow}, at(900*ms, 900*ms, sec, sec), 0},
		{"fixed over rate in a window", sluice.Limit{Rate: 2, Period: time.Second, Algorithm: sluice.FixedWindow}, at(100*ms, 200*ms, 300*ms), 1},
		{"sliding over rate", sluice.Limit{Rate: 2, Period: time.Second, Algorithm: sluice.SlidingWindow}, at(0, 500*ms, sec-1), 1},
		{"log at rate", sluice.Limit{Rate: 2, Period: time.Second, Algorithm: sluice.SlidingLog}, at(0, 500*ms, sec), 0},
		// Buckets of 500 ms: at 1.4 s the oldest bucket is [0, 0.5 s),
		// holding one unit, so 3 + 1 units may sit in the window.
		{"approx rate plus the oldest bucket", sluice.Limit{Rate: 3, Period: time.Second, Algorithm: sluice.ApproxSlidingWindow, Buckets: 2}, at(450*ms, 1400*ms, 1400*ms, 1400*ms), 0},
		{"approx over rate plus the oldest bucket", sluice.Limit{Rate: 3, Period: time.Second, Algorithm: sluice.ApproxSlidingWindow, Buckets: 2}, at(450*ms, 600*ms, 1400*ms, 1400*ms, 1400*ms), 1},
		{"approx never 2×rate", sluice.Limit{Rate: 3, Period: time.Second, Algorithm: sluice.ApproxSlidingWindow, Buckets: 2}, at(repeat(499*ms, 3)...).withAll(at(repeat(1400*ms, 3)...)), 1},
	}
	for _, tt := range tests {
		if got := boundViolations(tt.l, "k", tt.u); got != tt.want {
			t.Errorf("%s: boundViolations(%v, %v) = %d, want %d", tt.name, tt.l, tt.u, got, tt.want)
		}
	}
}

func (u units) withAll(v units) units { return append(append(units(nil), u...), v...) }

// storeFunc is a sluice.Store made of a function: a fake with a fixed
// answer, to check that Measure counts what the oracle disagrees with.
type storeFunc func(sluice.Request) sluice.Decision

func (f storeFunc) Decide(_ context.Context, r sluice.Request) (sluice.Decision, error) {
	return f(r), nil
}

func TestMeasureCounts(t *testing.T) {
	l := sluice.Limit{Rate: 2, Period: time.Second, Algorithm: sluice.SlidingLog}
	// Three takes at once, then three a period later: the oracle admits
	// the first two of each.
	tr := Trace{Name: "t", Requests: []Request{
		{Key: "k", Now: t0, Cost: 1}, {Key: "k", Now: t0, Cost: 1}, {Key: "k", Now: t0, Cost: 1},
		{Key: "k", Now: t0 + int64(time.Second), Cost: 1}, {Key: "k", Now: t0 + int64(time.Second), Cost: 1}, {Key: "k", Now: t0 + int64(time.Second), Cost: 1},
	}}
	tests := []struct {
		name  string
		store sluice.Store
		want  Result
	}{
		{"allow all", storeFunc(func(sluice.Request) sluice.Decision { return sluice.Decision{Allowed: true} }),
			// The third take of each instant is over; (t0, t0+1 s]
			// excludes t0, so the oracle admits two again a period later.
			// The algorithm agrees.
			Result{Admitted: 6, MaxInWindow: 3, MaxAtRequestTimes: 3, Bound: 2, Over: 2, OverExact: 2, OverBound: 2}},
		{"deny all", storeFunc(func(sluice.Request) sluice.Decision { return sluice.Decision{} }),
			// The oracle sees nothing admitted, so it would allow every one.
			Result{Admitted: 0, MaxInWindow: 0, Bound: 2, Under: 6, UnderExact: 6}},
		{"the algorithm", nil, Result{Admitted: 4, MaxInWindow: 2, MaxAtRequestTimes: 2, Bound: 2}},
	}
	for _, tt := range tests {
		s := tt.store
		if s == nil {
			s, _, _ = Direct()
		}
		got, err := Measure(context.Background(), s, l, tr)
		if err != nil {
			t.Fatalf("%s: Measure = %v", tt.name, err)
		}
		want := tt.want
		want.Limit, want.Trace, want.Requests, want.InOrder = l, "t", 6, true
		if got != want {
			t.Errorf("%s: Measure = %+v, want %+v", tt.name, got, want)
		}
	}
}
