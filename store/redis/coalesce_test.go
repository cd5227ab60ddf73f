package redis

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestCoalesceConformance runs the suite with one call in flight, so
// that concurrent requests queue and go in batches as often as they can.
func TestCoalesceConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) sluice.Store { return newStore(t, Config{InFlight: 1}) })
}

// queued waits until n requests wait in s's queue.
func queued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.co.mu.Lock()
		got := len(s.co.queue)
		s.co.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests queued, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// pause pauses the server's writes, scripts included, for d.
func pause(t *testing.T, d time.Duration) {
	t.Helper()
	if _, err := sharedServer(t).Do("CLIENT", "PAUSE", strconv.FormatInt(d.Milliseconds(), 10), "WRITE"); err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}
}

// TestCoalesce holds the one slot with a request the server has paused,
// queues three more for three keys and one with a short deadline: the
// three must go in one script call once the first comes back, and the
// one that gave up in the queue must fail without being applied.
func TestCoalesce(t *testing.T) {
	s := newStore(t, Config{InFlight: 1})
	prefix := uniquePrefix(t)
	limits := []sluice.Limit{{Rate: 5, Period: time.Hour}}
	ctx := context.Background()
	take(t, s, sluice.Request{Prefix: prefix, Key: "warm", Limits: limits, Cost: 1}) // loads the script
	before := commandCalls(t)

	pause(t, 300*time.Millisecond)
	var wg sync.WaitGroup
	decide := func(key string) {
		defer wg.Done()
		d, err := s.Decide(ctx, sluice.Request{Prefix: prefix, Key: key, Limits: limits, Cost: 1})
		if err != nil || !d.Allowed || d.Remaining != 4 {
			t.Errorf("Decide(%q) = %+v, %v; want allowed, 4 remaining", key, d, err)
		}
	}
	wg.Add(1)
	go decide("first")
	for {
		s.co.mu.Lock()
		busy := s.co.inFlight == 1
		s.co.mu.Unlock()
		if busy {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for _, k := range []string{"a", "b", "c"} {
		wg.Add(1)
		go decide(k)
	}
	queued(t, s, 3)
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err := s.Decide(short, sluice.Request{Prefix: prefix, Key: "gave-up", Limits: limits, Cost: 1})
	if !errors.Is(err, sluice.ErrStore) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Decide with a deadline that passed in the queue: err = %v, want ErrStore and DeadlineExceeded", err)
	}
	wg.Wait()

	if got := commandCalls(t)["evalsha"] - before["evalsha"]; got != 2 {
		t.Errorf("EVALSHA calls = %d, want 2: the first request, then the three queued in one", got)
	}
	if d := take(t, s, sluice.Request{Prefix: prefix, Key: "gave-up", Limits: limits, Op: sluice.OpPeek, Cost: 1}); d.Remaining != 4 {
		t.Errorf("peek of the request that gave up in the queue: Remaining = %d, want 4: it must not be applied", d.Remaining)
	}
}

// TestCoalesceGiveUps checks the recycling of the queue's waiters: 32
// goroutines, each with a limit of its own, take under deadlines short
// enough that many give up in the queue or on the way, while the others'
// answers keep arriving. Every answer must be its own request's (its own
// limit, a count within it), and every failure an ErrStore.
func TestCoalesceGiveUps(t *testing.T) {
	s := newStore(t, Config{InFlight: 2})
	prefix := uniquePrefix(t)
	take(t, s, sluice.Request{Prefix: prefix, Key: "warm", Limits: []sluice.Limit{{Rate: 1, Period: time.Hour}}, Cost: 1})
	var wg sync.WaitGroup
	var answered, gaveUp atomic.Int64
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			limits := []sluice.Limit{{Rate: 1000 + g, Period: time.Hour}}
			for i := range 300 {
				// Deadlines from 0 to 1.75 ms, which a round trip on
				// loopback may or may not beat, and one in nine of 10 s,
				// which any does.
				timeout := time.Duration(i%8) * 250 * time.Microsecond
				if i%9 == 8 {
					timeout = 10 * time.Second
				}
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				d, err := s.Decide(ctx, sluice.Request{Prefix: prefix, Key: strconv.Itoa(g), Limits: limits, Cost: 1})
				cancel()
				switch {
				case err != nil:
					if !errors.Is(err, sluice.ErrStore) {
						t.Errorf("goroutine %d: Decide = %v, want an ErrStore", g, err)
						return
					}
					gaveUp.Add(1)
				case d.Limit != limits[0] || d.Remaining < 0 || d.Remaining >= limits[0].Rate:
					t.Errorf("goroutine %d got %+v: not its own limit's answer", g, d)
					return
				default:
					answered.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	a, f := answered.Load(), gaveUp.Load()
	t.Logf("%d answered, %d gave up", a, f)
	if a == 0 || f == 0 {
		t.Errorf("%d answered, %d gave up: the test should see both", a, f)
	}
}
