package testclock

import (
	"sync"
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	c := New(T0)
	if got := c.Now(); got != T0 {
		t.Fatalf("New(T0).Now() = %v, want %v", got, T0)
	}
	c.Advance(90 * time.Second)
	if got, want := c.Now(), T0.Add(90*time.Second); got != want {
		t.Fatalf("after Advance(90s): %v, want %v", got, want)
	}
	c.Advance(-time.Minute)
	if got, want := c.Now(), T0.Add(30*time.Second); got != want {
		t.Fatalf("after Advance(-1m): %v, want %v", got, want)
	}
	c.Set(T0.Add(time.Hour))
	if got, want := c.Now(), T0.Add(time.Hour); got != want {
		t.Fatalf("after Set: %v, want %v", got, want)
	}
	if got := (&Clock{}).Now(); !got.Equal(time.Unix(0, 0)) {
		t.Fatalf("zero Clock reads %v, want the Unix epoch", got)
	}
}

// TestClockConcurrent is for the race detector: goroutines read while
// the test moves the clock.
func TestClockConcurrent(t *testing.T) {
	c := New(T0)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := T0
			for range 1000 {
				now := c.Now()
				if now.Before(last) {
					t.Errorf("clock went back: %v after %v", now, last)
					return
				}
				last = now
			}
		}()
	}
	for range 1000 {
		c.Advance(time.Millisecond)
	}
	wg.Wait()
}
