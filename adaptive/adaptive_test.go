package adaptive

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testing/loadsim"
)

var (
	_ sluice.AdaptiveLimit = (*AIMD)(nil)
	_ sluice.AdaptiveLimit = (*Vegas)(nil)
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// server is the simulated backend: 10 requests at full speed, 50 ms each
// alone, 100 clients, so that without a limit 100 are in flight and each
// would take half a second: the clients give up after 250 ms.
var server = loadsim.Config{
	Capacity: 10, Work: 50 * time.Millisecond, Clients: 100, Think: 5 * time.Millisecond,
	Timeout: 250 * time.Millisecond, Tick: time.Millisecond,
}

// run drives lim on the simulated server for 30 s and returns the limit
// at the end, the mean latency of completed requests over the last 10 s,
// and the completions per second then.
func run(t *testing.T, c loadsim.Config, lim sluice.AdaptiveLimit) (limit int, latency time.Duration, rate float64) {
	t.Helper()
	inflight := 0
	admit := func(now time.Time, _ int) (func(time.Time, bool), bool) {
		if inflight >= lim.Limit() {
			return nil, false
		}
		inflight++
		start, at := now, inflight
		return func(now time.Time, dropped bool) {
			inflight--
			lim.Observe(now, now.Sub(start), at, dropped)
		}, true
	}
	sim := loadsim.New(t0, c, admit)
	sim.Run(20 * time.Second)
	stats, _ := sim.Run(10 * time.Second)
	var n int
	var sum time.Duration
	for _, s := range stats {
		n += s.Completed
		sum += s.Latency
	}
	if n == 0 {
		t.Fatal("no request completed")
	}
	return lim.Limit(), sum / time.Duration(n), float64(n) / 10
}

// TestConvergence checks that each limit settles near the server's
// capacity from below and from above: throughput near the server's best
// (200/s), latency far below the half second of no limit.
func TestConvergence(t *testing.T) {
	tests := []struct {
		name           string
		new            func(initial int) (sluice.AdaptiveLimit, error)
		minLim, maxLim int
		maxLatency     time.Duration
	}{
		{"vegas", func(i int) (sluice.AdaptiveLimit, error) { return NewVegas(VegasConfig{Initial: i}) }, 10, 24, 100 * time.Millisecond},
		{"aimd", func(i int) (sluice.AdaptiveLimit, error) {
			return NewAIMD(AIMDConfig{Initial: i, Timeout: 100 * time.Millisecond})
		}, 12, 22, 110 * time.Millisecond},
	}
	for _, tt := range tests {
		for _, initial := range []int{1, 5, 200} {
			t.Run(fmt.Sprintf("%s/from%d", tt.name, initial), func(t *testing.T) {
				lim, err := tt.new(initial)
				if err != nil {
					t.Fatal(err)
				}
				got, latency, rate := run(t, server, lim)
				t.Logf("limit %d, mean latency %v, %.0f/s", got, latency, rate)
				if got < tt.minLim || got > tt.maxLim {
					t.Errorf("limit = %d, want %d to %d", got, tt.minLim, tt.maxLim)
				}
				if latency > tt.maxLatency {
					t.Errorf("mean latency %v, want at most %v", latency, tt.maxLatency)
				}
				if rate < 190 {
					t.Errorf("throughput %.0f/s, want at least 190 (capacity 200/s)", rate)
				}
			})
		}
	}
}

// TestNoLimit shows what the limits prevent: the same server with every
// request admitted runs a queue of 100 at half a second each, so every
// client gives up and nothing completes in time.
func TestNoLimit(t *testing.T) {
	var admitted int
	sim := loadsim.New(t0, server, func(time.Time, int) (func(time.Time, bool), bool) {
		admitted++
		return func(time.Time, bool) {}, true
	})
	stats, most := sim.Run(10 * time.Second)
	completed := 0
	for _, s := range stats {
		completed += s.Completed
	}
	if completed > admitted/10 || most != server.Clients {
		t.Errorf("without a limit: %d of %d requests completed, at most %d in flight; want under a tenth, and all %d clients in flight",
			completed, admitted, most, server.Clients)
	}
}

// TestDropped checks that dropped samples shrink both limits
// multiplicatively and that the bounds hold.
func TestDropped(t *testing.T) {
	v, _ := NewVegas(VegasConfig{Initial: 100, Min: 5})
	a, _ := NewAIMD(AIMDConfig{Initial: 100, Min: 5})
	for _, lim := range []sluice.AdaptiveLimit{v, a} {
		now := t0.Add(time.Second)
		lim.Observe(now, time.Millisecond, 100, true)
		if got := lim.Limit(); got != 90 {
			t.Errorf("%T after one drop: limit %d, want 90", lim, got)
		}
		lim.Observe(now.Add(time.Millisecond), 2*time.Millisecond, 100, true)
		if got := lim.Limit(); got != 90 {
			t.Errorf("%T after a drop of a request older than the cut: limit %d, want 90 still", lim, got)
		}
		for i := range 100 {
			now = now.Add(10 * time.Millisecond)
			lim.Observe(now, time.Millisecond+time.Duration(i), 100, true)
		}
		if got := lim.Limit(); got != 5 {
			t.Errorf("%T after many drops: limit %d, want the minimum 5", lim, got)
		}
	}
}

// TestIdle checks that samples taken with less than half the limit in
// use leave it unchanged.
func TestIdle(t *testing.T) {
	v, _ := NewVegas(VegasConfig{Initial: 40})
	a, _ := NewAIMD(AIMDConfig{Initial: 40})
	for _, lim := range []sluice.AdaptiveLimit{v, a} {
		for range 1000 {
			lim.Observe(t0, time.Millisecond, 3, false)
		}
		if got := lim.Limit(); got != 40 {
			t.Errorf("%T after idle samples: limit %d, want 40", lim, got)
		}
	}
}

func TestInvalidConfig(t *testing.T) {
	for _, c := range []AIMDConfig{{Min: 5, Max: 4}, {Initial: 2000}, {Backoff: 1.5}, {Timeout: -1}} {
		if _, err := NewAIMD(c); err == nil {
			t.Errorf("NewAIMD(%+v) = nil error", c)
		}
	}
	for _, c := range []VegasConfig{{Alpha: 6, Beta: 3}, {Min: -1}, {Backoff: -0.5}, {ProbeEvery: -1}} {
		if _, err := NewVegas(c); err == nil {
			t.Errorf("NewVegas(%+v) = nil error", c)
		}
	}
}
