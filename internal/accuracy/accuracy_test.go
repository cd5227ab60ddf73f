package accuracy

import (
	"context"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestReport runs the report's traces through the algorithms, prints the
// table with -v, and holds every row to its algorithm's stated bound.
func TestReport(t *testing.T) {
	rs := directResults(t)
	logTable(t, rs)
	checkReport(t, rs)
}

var direct struct {
	once sync.Once
	rs   []Result
	err  error
}

// directResults returns Run(Direct, 1), run once for every test.
func directResults(t *testing.T) []Result {
	t.Helper()
	direct.once.Do(func() { direct.rs, direct.err = Run(context.Background(), Direct, 1) })
	if direct.err != nil {
		t.Fatalf("Run(Direct, 1) = %v", direct.err)
	}
	return direct.rs
}

// checkReport asserts what every result of Run must show.
func checkReport(t *testing.T, rs []Result) {
	t.Helper()
	if want := len(Limits()) * len(Traces(Limits()[0], Actor, 1)); len(rs) != want {
		t.Fatalf("Run returned %d results, want %d", len(rs), want)
	}
	// On the boundary burst, every algorithm's most in one window: GCRA
	// admits the opener and a full bucket at 59.9 s and nothing 0.2 s
	// later (101); the fixed window shows its flaw, Rate on each side of
	// the boundary (200); every sliding window stays at Rate.
	boundary := map[sluice.Algorithm]int{
		sluice.GCRA:                101,
		sluice.FixedWindow:         200,
		sluice.SlidingWindow:       100,
		sluice.ApproxSlidingWindow: 100,
		sluice.SlidingLog:          100,
	}
	for _, r := range rs {
		if err := r.Check(); err != nil {
			t.Error(err)
		}
		if r.Trace == "boundary-burst" {
			if want := boundary[r.Limit.Algorithm]; r.MaxInWindow != want {
				t.Errorf("%v on boundary-burst: max in window = %d, want %d", r.Limit, r.MaxInWindow, want)
			}
		}
		if r.MaxInWindow == 0 || r.Admitted == 0 {
			t.Errorf("%v on %s admitted nothing", r.Limit, r.Trace)
		}
		// Half the rate never comes near any limit: everything passes.
		if r.Trace == "poisson-0.5x" && (r.Admitted != r.Requests || r.Over+r.Under != 0) {
			t.Errorf("%v on poisson-0.5x: admitted %d/%d, over %d, under %d; want all, 0, 0",
				r.Limit, r.Admitted, r.Requests, r.Over, r.Under)
		}
	}
}

func logTable(t *testing.T, rs []Result) {
	t.Helper()
	var b strings.Builder
	if err := WriteTable(&b, rs); err != nil {
		t.Fatal(err)
	}
	t.Log("accuracy of 100/min on adversarial traces:\n" + b.String())
}

// randomLimits have rates and periods that do not divide evenly, bursts
// other than the rate, and few buckets, where rounding errors would show.
var randomLimits = []sluice.Limit{
	{Rate: 5, Period: time.Second},
	{Rate: 7, Period: time.Second, Burst: 3},
	{Rate: 3, Period: time.Second, Burst: 7},
	{Rate: 7, Period: time.Second, Algorithm: sluice.FixedWindow},
	{Rate: 7, Period: time.Second, Algorithm: sluice.FixedWindow, Staggered: true},
	{Rate: 7, Period: time.Second, Algorithm: sluice.SlidingWindow, Buckets: 3},
	{Rate: 7, Period: time.Second, Algorithm: sluice.SlidingWindow, Buckets: 1},
	{Rate: 7, Period: time.Second + 7, Algorithm: sluice.SlidingWindow, Buckets: 7},
	{Rate: 7, Period: time.Second, Algorithm: sluice.ApproxSlidingWindow, Buckets: 3},
	{Rate: 7, Period: time.Second, Algorithm: sluice.ApproxSlidingWindow, Buckets: 1},
	{Rate: 7, Period: time.Second + 7, Algorithm: sluice.ApproxSlidingWindow, Buckets: 7},
	{Rate: 7, Period: time.Second, Algorithm: sluice.SlidingLog},
	{Rate: 1, Period: time.Second, Algorithm: sluice.SlidingLog},
}

// randomTrace mixes bursts at one instant, steady steps, two actors,
// costs up to the burst, and (when back) times that step back by up to
// two periods or jitter back by a fiftieth of one.
func randomTrace(l sluice.Limit, seed uint64, back bool) Trace {
	rng := rand.New(rand.NewPCG(seed, l.StateID()))
	p := int64(l.Period)
	tr := Trace{Name: "random"}
	now := Start.UnixNano()
	for range 300 {
		switch k := rng.IntN(10); {
		case k == 0 && back:
			now -= rng.Int64N(2 * p)
		case k == 1 && back:
			now -= rng.Int64N(p / 50)
		case k <= 3: // same instant: a burst
		default:
			now += rng.Int64N(2 * p / int64(l.Rate))
		}
		key := []string{"a", "b"}[rng.IntN(2)]
		tr.Requests = append(tr.Requests, Request{Key: key, Now: now, Cost: 1 + rng.IntN(l.MaxBurst())})
	}
	return tr
}

// TestRandomTraces holds every algorithm to its stated bounds on random
// traces, with times running forwards and with times going back.
func TestRandomTraces(t *testing.T) {
	for _, l := range randomLimits {
		t.Run(l.String(), func(t *testing.T) {
			for seed := range uint64(60) {
				tr := randomTrace(l, seed, seed%2 == 1)
				s, release, _ := Direct()
				r, err := Measure(context.Background(), s, l, tr)
				release()
				if err != nil {
					t.Fatalf("seed %d: Measure = %v", seed, err)
				}
				if r.InOrder == (seed%2 == 1) {
					t.Fatalf("seed %d: InOrder = %v, want %v", seed, r.InOrder, seed%2 == 0)
				}
				if err := r.Check(); err != nil {
					t.Errorf("seed %d: %v", seed, err)
				}
			}
		})
	}
}

func TestTracesDeterministic(t *testing.T) {
	for _, l := range Limits()[:3] { // traces differ by Rate, Period and offset
		a, b := Traces(l, Actor, 7), Traces(l, Actor, 7)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("Traces(%v, 7) differs between calls", l)
		}
		if reflect.DeepEqual(a, Traces(l, Actor, 8)) {
			t.Fatalf("Traces(%v, 7) = Traces(%v, 8)", l, l)
		}
	}
}

// TestBoundaryBurstPlacement checks that the boundary burst straddles a
// fixed window boundary of the limit, staggered or not, as documented.
func TestBoundaryBurstPlacement(t *testing.T) {
	for _, l := range Limits() {
		tr := BoundaryBurst(l, Actor)
		if got, want := len(tr.Requests), 2*l.Rate+1; got != want {
			t.Fatalf("BoundaryBurst(%v) has %d requests, want %d", l, got, want)
		}
		first, last := tr.Requests[0].Now, tr.Requests[len(tr.Requests)-1].Now
		p := int64(l.Period)
		if got, want := last-first, p+p/600; got != want {
			t.Errorf("BoundaryBurst(%v) spans %v, want %v", l, time.Duration(got), time.Duration(want))
		}
		w0, w1 := windowStart(l, Actor, first), windowStart(l, Actor, first+p-p/600)
		if got, want := w1-w0, p; got != want {
			t.Errorf("BoundaryBurst(%v): first burst %v past the opener's window, want %v", l, time.Duration(got), time.Duration(want))
		}
		if got := windowStart(l, Actor, last) - w1; got != p {
			t.Errorf("BoundaryBurst(%v): second burst %v past the first's window, want %v", l, time.Duration(got), l.Period)
		}
	}
}

func TestPoissonRate(t *testing.T) {
	l := Limits()[0]
	for _, mult := range []float64{0.5, 1, 3} {
		tr := Poisson(l, Actor, 1, mult, 100*int64(l.Period))
		got, want := float64(len(tr.Requests)), mult*100*float64(l.Rate)
		// A Poisson count of mean m has deviation √m: 3% covers 4σ at
		// mult 0.5.
		if got < 0.97*want || got > 1.03*want {
			t.Errorf("Poisson(%v×) gave %v requests, want about %v", mult, got, want)
		}
	}
}
