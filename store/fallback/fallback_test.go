package fallback

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/store/storetest"
)

// fakeStore is a primary whose behaviour a test sets: DecideFunc, when
// set, answers; otherwise a memory store does. It counts calls.
type fakeStore struct {
	mem        *memory.Store
	calls      atomic.Int64
	mu         sync.Mutex
	DecideFunc func(ctx context.Context, r sluice.Request) (sluice.Decision, error)
}

func newFake(t *testing.T) *fakeStore { return newFakeClock(t, nil) }

// newFakeClock returns a fakeStore whose memory store reads clock.
func newFakeClock(t *testing.T, clock func() time.Time) *fakeStore {
	m := memory.New(memory.Config{SweepInterval: -1, Clock: clock})
	t.Cleanup(func() { m.Close() })
	return &fakeStore{mem: m}
}

func (f *fakeStore) Decide(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
	f.calls.Add(1)
	f.mu.Lock()
	fn := f.DecideFunc
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx, r)
	}
	return f.mem.Decide(ctx, r)
}

func (f *fakeStore) set(fn func(ctx context.Context, r sluice.Request) (sluice.Decision, error)) {
	f.mu.Lock()
	f.DecideFunc = fn
	f.mu.Unlock()
}

var errDown = fmt.Errorf("%w: connection refused", sluice.ErrStore)

func failing(context.Context, sluice.Request) (sluice.Decision, error) {
	return sluice.Decision{}, errDown
}

func newStore(t *testing.T, c Config) *Store {
	t.Helper()
	s, err := New(c)
	if err != nil {
		t.Fatalf("New(%+v) = %v", c, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestCloseTwice: a second Close returns the first's result, without a
// panic (server closes the Store wrapped around each memcached server,
// and so does the memcached store).
func TestCloseTwice(t *testing.T) {
	s, err := New(Config{Primary: newFake(t), Policy: sluice.FailLocal})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := s.Close(); err != nil {
			t.Errorf("Close #%d = %v", i+1, err)
		}
	}
}

// TestConformance runs the conformance suite through a Store whose
// primary works: the wrapper must change nothing.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) sluice.Store {
		return newStore(t, Config{Primary: newFake(t), Policy: sluice.FailLocal, DenyCache: -1})
	})
}

// TestConformanceBatch runs the batch suite through DecideBatch, over a
// primary that decides a batch one request at a time.
func TestConformanceBatch(t *testing.T) {
	storetest.RunBatch(t, func(t *testing.T) storetest.BatchStore {
		return newStore(t, Config{Primary: newFake(t), Policy: sluice.FailLocal, DenyCache: -1})
	})
}

// TestPolicy checks what each policy answers while the primary fails.
func TestPolicy(t *testing.T) {
	limit := sluice.Limit{Rate: 10, Period: time.Hour}
	for _, tc := range []struct {
		policy    sluice.FailurePolicy
		instances int
		want      int // allowed of 20 takes
	}{
		{sluice.FailOpen, 1, 20},
		{sluice.FailClosed, 1, 0},
		{sluice.FailLocal, 1, 10},
		{sluice.FailLocal, 4, 3}, // ⌈10/4⌉
	} {
		t.Run(fmt.Sprintf("%v/%d", tc.policy, tc.instances), func(t *testing.T) {
			primary := newFake(t)
			primary.set(failing)
			var errs atomic.Int64
			s := newStore(t, Config{Primary: primary, Policy: tc.policy, Instances: tc.instances,
				OnError: func(error) { errs.Add(1) }})
			allowed := 0
			for i := range 20 {
				d, err := s.Decide(context.Background(), sluice.Request{Key: "a", Limits: []sluice.Limit{limit}, Cost: 1, Now: t0})
				if err != nil {
					t.Fatalf("Decide %d = %v, want the policy's decision", i, err)
				}
				if d.Limit != limit {
					t.Errorf("Decision.Limit = %v, want the configured %v", d.Limit, limit)
				}
				if d.Allowed {
					allowed++
				} else if d.RetryAfter <= 0 {
					t.Errorf("denied with RetryAfter %v, want > 0", d.RetryAfter)
				}
			}
			if allowed != tc.want {
				t.Errorf("allowed %d of 20, want %d", allowed, tc.want)
			}
			st := s.Stats()
			if st.Degraded != 20 || st.Errors != 5 || errs.Load() != 5 || st.Opens != 1 {
				t.Errorf("Stats = %+v, OnError calls %d; want 20 degraded, 5 errors before the breaker opened", st, errs.Load())
			}
			if got := primary.calls.Load(); got != 5 {
				t.Errorf("primary called %d times, want 5 (then the breaker is open)", got)
			}
		})
	}
}

// TestTimeout checks, on a fake clock, that a primary that hangs costs
// each request exactly Timeout until the breaker opens, and nothing after.
func TestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := newFake(t)
		primary.set(func(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
			<-ctx.Done()
			return sluice.Decision{}, fmt.Errorf("%w: %w", sluice.ErrStore, ctx.Err())
		})
		s := newStore(t, Config{Primary: primary, Policy: sluice.FailOpen, Timeout: 30 * time.Millisecond, Threshold: 3})
		for i := range 6 {
			start := time.Now()
			d, err := s.Decide(context.Background(), sluice.Request{Key: "a", Limits: []sluice.Limit{sluice.PerSecond(1)}, Cost: 1})
			want := 30 * time.Millisecond
			if i >= 3 {
				want = 0
			}
			if took := time.Since(start); err != nil || !d.Allowed || took != want {
				t.Errorf("Decide %d = %v, %v after %v; want allowed after %v", i, d.Allowed, err, took, want)
			}
		}
	})
}

// TestBreakerRecovery checks that after Cooldown one request probes the
// primary, that its success closes the breaker, and that the takes
// allowed locally meanwhile are replayed into the primary.
func TestBreakerRecovery(t *testing.T) {
	var now atomic.Int64
	now.Store(t0.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	primary := newFakeClock(t, clock)
	primary.set(failing)
	var transitions []bool
	s := newStore(t, Config{Primary: primary, Policy: sluice.FailLocal, Threshold: 2, Cooldown: time.Second, Clock: clock,
		OnBreaker: func(open bool) { transitions = append(transitions, open) }})
	limit := []sluice.Limit{{Rate: 100, Period: time.Hour}}
	take := func() sluice.Decision {
		t.Helper()
		d, err := s.Decide(context.Background(), sluice.Request{Key: "a", Limits: limit, Cost: 1})
		if err != nil {
			t.Fatalf("Decide = %v", err)
		}
		return d
	}
	for range 7 {
		take()
	}
	if !s.Open() || primary.calls.Load() != 2 {
		t.Fatalf("after 7 takes on a failing primary: Open = %v, calls %d; want open after 2", s.Open(), primary.calls.Load())
	}
	now.Add(int64(time.Second)) // cooldown over; the primary still fails
	take()
	if !s.Open() || primary.calls.Load() != 3 {
		t.Fatalf("failed probe: Open = %v, calls %d; want open, 3 calls", s.Open(), primary.calls.Load())
	}
	primary.set(nil) // back
	now.Add(int64(time.Second))
	d := take()
	if s.Open() || !d.Allowed {
		t.Fatalf("successful probe: Open = %v, Decision %+v; want closed, allowed", s.Open(), d)
	}
	s.replayWG.Wait()
	if st := s.Stats(); st.Replayed != 8 || st.ReplayFailed != 0 {
		t.Errorf("Stats = %+v, want 8 local takes replayed", st)
	}
	// The primary now counts the 8 local takes and the probe's.
	p, err := primary.mem.Decide(context.Background(), sluice.Request{Key: "a", Limits: limit, Op: sluice.OpPeek, Cost: 1, Now: clock()})
	if err != nil || p.Remaining != 100-9-1 {
		t.Errorf("primary peek Remaining = %d (%v), want %d", p.Remaining, err, 100-9-1)
	}
	if fmt.Sprint(transitions) != "[true false]" {
		t.Errorf("OnBreaker calls = %v, want [true false]", transitions)
	}
}

// TestDenyCache checks that a denied actor is answered locally until its
// RetryAfter, with the waits shortened, and that a reset forgets it.
func TestDenyCache(t *testing.T) {
	primary := newFake(t)
	s := newStore(t, Config{Primary: primary, Policy: sluice.FailLocal})
	limit := []sluice.Limit{{Rate: 2, Period: time.Second}}
	at := func(d time.Duration, op sluice.Op) sluice.Decision {
		t.Helper()
		dec, err := s.Decide(context.Background(), sluice.Request{Key: "a", Limits: limit, Op: op, Cost: 1, Now: t0.Add(d)})
		if err != nil {
			t.Fatalf("Decide = %v", err)
		}
		return dec
	}
	at(0, sluice.OpTake)
	at(0, sluice.OpTake)
	denied := at(0, sluice.OpTake)
	if denied.Allowed || denied.RetryAfter != 500*time.Millisecond {
		t.Fatalf("third take = %+v, want denied for 500ms", denied)
	}
	calls := primary.calls.Load()
	d := at(200*time.Millisecond, sluice.OpTake)
	if d.Allowed || d.RetryAfter != 300*time.Millisecond || primary.calls.Load() != calls {
		t.Errorf("take 200ms later = %+v after %d primary calls; want denied for 300ms from the cache",
			d, primary.calls.Load()-calls)
	}
	if d := at(500*time.Millisecond, sluice.OpTake); !d.Allowed || primary.calls.Load() != calls+1 {
		t.Errorf("take at RetryAfter = %+v, want allowed by the primary", d)
	}
	at(500*time.Millisecond, sluice.OpTake) // denied again, cached
	at(500*time.Millisecond, sluice.OpReset)
	if d := at(600*time.Millisecond, sluice.OpTake); !d.Allowed {
		t.Errorf("take after reset = %+v, want allowed", d)
	}
	if got := s.Stats().DenyHits; got != 1 {
		t.Errorf("DenyHits = %d, want 1", got)
	}
}

// TestCallerCancelled checks that a caller's own cancellation is returned
// as an error and does not count against the primary.
func TestCallerCancelled(t *testing.T) {
	primary := newFake(t)
	primary.set(func(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
		<-ctx.Done()
		return sluice.Decision{}, fmt.Errorf("%w: %w", sluice.ErrStore, ctx.Err())
	})
	s := newStore(t, Config{Primary: primary, Policy: sluice.FailLocal, Threshold: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Decide(ctx, sluice.Request{Key: "a", Limits: []sluice.Limit{sluice.PerSecond(1)}, Cost: 1})
	if !errors.Is(err, context.Canceled) || s.Open() || s.Stats().Errors != 0 {
		t.Errorf("Decide(cancelled) = %v, Open %v, Stats %+v; want context.Canceled, breaker closed", err, s.Open(), s.Stats())
	}
	if _, err := s.Decide(context.Background(), sluice.Request{Key: "a", Cost: 1}); !errors.Is(err, sluice.ErrInvalidRequest) {
		t.Errorf("Decide(no limits) = %v, want ErrInvalidRequest", err)
	}
}

// TestNoGoroutineGrowth checks that failing and slow primaries, under
// concurrent load, leave no goroutines behind.
func TestNoGoroutineGrowth(t *testing.T) {
	primary := newFake(t)
	primary.set(func(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
		<-ctx.Done()
		return sluice.Decision{}, fmt.Errorf("%w: %w", sluice.ErrStore, ctx.Err())
	})
	s := newStore(t, Config{Primary: primary, Policy: sluice.FailLocal, Timeout: time.Millisecond, Cooldown: time.Millisecond})
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 200 {
				if _, err := s.Decide(context.Background(), sluice.Request{Key: fmt.Sprint(g, i%7), Limits: []sluice.Limit{sluice.PerSecond(5)}, Cost: 1}); err != nil {
					t.Errorf("Decide = %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	primary.set(nil)
	s.replayWG.Wait()
	if after := runtime.NumGoroutine(); after > before+2 {
		t.Errorf("goroutines: %d before, %d after", before, after)
	}
}
