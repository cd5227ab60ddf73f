package memory

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
)

// TestCoarseClock checks, on synctest's fake time, that requests whose
// limits tolerate it read the ticker's latest reading, at most one
// resolution old, and that the ticker stops when idle or closed.
func TestCoarseClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{SweepInterval: -1})
		perSecond := []sluice.Limit{sluice.PerSecond(10)}
		decideAt := func() time.Time {
			t.Helper()
			return mustDecide(t, s, sluice.Request{Key: "k", Limits: perSecond, Cost: 1}).Time
		}
		if got, want := decideAt(), time.Now(); !got.Equal(want) {
			t.Errorf("first decision at %v, want %v: the ticker's first reading is exact", got, want)
		}
		time.Sleep(5*time.Millisecond + 500*time.Microsecond)
		synctest.Wait()
		if got, want := decideAt(), time.Now().Add(-500*time.Microsecond); !got.Equal(want) {
			t.Errorf("decision 5.5 ms on at %v, want the 5 ms tick's %v", got, want)
		}

		// Idle for a second of ticks: the ticker stops, and the next read
		// is exact and starts it again.
		time.Sleep(2*time.Second + 300*time.Microsecond)
		synctest.Wait()
		if s.clk.isRunning() {
			t.Errorf("ticker still running after 2 s without a read")
		}
		if got, want := decideAt(), time.Now(); !got.Equal(want) {
			t.Errorf("decision after idling at %v, want the exact %v", got, want)
		}
		if !s.clk.isRunning() {
			t.Errorf("ticker not restarted by a read")
		}

		s.Close()
		if s.clk.isRunning() {
			t.Errorf("ticker running after Close")
		}
		time.Sleep(1500 * time.Microsecond)
		if got, want := decideAt(), time.Now(); !got.Equal(want) {
			t.Errorf("decision after Close at %v, want the exact %v", got, want)
		}
	})
}

// TestExactClock checks that a limit too fine for the resolution, and a
// store with a negative Resolution, read the clock exactly: a limit of
// one per 100 µs is not held to one per tick.
func TestExactClock(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  time.Duration
		l    sluice.Limit
	}{
		{"fine limit", 0, sluice.Every(100 * time.Microsecond)},
		{"negative resolution", -1, sluice.PerSecond(10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{SweepInterval: -1, Resolution: tc.res})
				defer s.Close()
				admitted := 0
				for range 100 {
					d := mustDecide(t, s, sluice.Request{Key: "k", Limits: []sluice.Limit{tc.l}, Cost: 1})
					if !d.Time.Equal(time.Now()) {
						t.Fatalf("decision at %v, want the exact %v", d.Time, time.Now())
					}
					if d.Allowed {
						admitted++
					}
					time.Sleep(100 * time.Microsecond)
				}
				if tc.l.Rate == 1 && admitted != 100 {
					t.Errorf("admitted %d of 100 requests 100 µs apart, want 100", admitted)
				}
				if s.clk.isRunning() {
					t.Errorf("ticker running, want none")
				}
			})
		})
	}
}

func TestCoarseFits(t *testing.T) {
	for _, tc := range []struct {
		l    sluice.Limit
		want bool
	}{
		{sluice.PerSecond(100), true},                                    // refills its burst in 1 s
		{sluice.Limit{Rate: 1000, Period: time.Second, Burst: 10}, true}, // 10 ms
		{sluice.Limit{Rate: 1000, Period: time.Second, Burst: 9}, false}, // 9 ms
		{sluice.Every(5 * time.Millisecond), false},
		{sluice.Limit{Rate: 1e6, Period: 10 * time.Millisecond, Burst: 1e6}, true},
		{sluice.Limit{Rate: 5, Period: 10 * time.Millisecond, Algorithm: sluice.FixedWindow}, true},
		{sluice.Limit{Rate: 5, Period: 9 * time.Millisecond, Algorithm: sluice.SlidingLog}, false},
		{sluice.Limit{Rate: 5, Period: 100 * time.Millisecond, Algorithm: sluice.SlidingWindow, Buckets: 10}, true},
		{sluice.Limit{Rate: 5, Period: 100 * time.Millisecond, Algorithm: sluice.ApproxSlidingWindow, Buckets: 11}, false},
	} {
		if got := coarseFits([]sluice.Limit{tc.l}, time.Millisecond); got != tc.want {
			t.Errorf("coarseFits(%v, 1ms) = %v, want %v", tc.l, got, tc.want)
		}
	}
	if coarseFits([]sluice.Limit{sluice.PerMinute(1), sluice.Every(time.Millisecond)}, time.Millisecond) {
		t.Errorf("coarseFits of a policy with one fine limit = true, want false")
	}
}

// TestCoarseClockConcurrent reads the coarse clock from many goroutines
// while the ticker starts and stops, for the race detector.
func TestCoarseClockConcurrent(t *testing.T) {
	s := New(Config{SweepInterval: -1, Resolution: 50 * time.Microsecond})
	defer s.Close()
	ctx := context.Background()
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			last := time.Time{}
			for i := range 2000 {
				d, err := s.Decide(ctx, sluice.Request{Key: "k", Limits: []sluice.Limit{sluice.PerMinute(1e6)}, Cost: 1})
				if err != nil {
					t.Errorf("goroutine %d, decision %d: %v", g, i, err)
					return
				}
				if d.Time.Before(last) {
					t.Errorf("goroutine %d, decision %d at %v, before its previous %v", g, i, d.Time, last)
					return
				}
				last = d.Time
				if i%500 == 0 {
					s.clk.close() // stop the ticker mid-run; later reads are exact
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}

// isRunning reports whether the clock's ticker runs.
func (c *clock) isRunning() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}
