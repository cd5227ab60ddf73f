package sluice_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

// clock is a fake clock on a time grid: tests move it by hand.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) Advance(d time.Duration) { c.now = c.now.Add(d) }

func newLimiter(t *testing.T, c sluice.Config) (*sluice.Limiter, *clock) {
	t.Helper()
	store := memory.New(memory.Config{})
	t.Cleanup(func() { store.Close() })
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.Clock = clk.Now
	lim, err := sluice.New(store, c)
	if err != nil {
		t.Fatalf("New(%+v) = %v", c, err)
	}
	return lim, clk
}

func TestNewErrors(t *testing.T) {
	store := memory.New(memory.Config{})
	defer store.Close()
	tests := []struct {
		name  string
		store sluice.Store
		c     sluice.Config
		want  error
	}{
		{"nil store", nil, sluice.Config{Limits: []sluice.Limit{sluice.PerSecond(1)}}, sluice.ErrInvalidRequest},
		{"no limits", store, sluice.Config{}, sluice.ErrInvalidRequest},
		{"bad limit", store, sluice.Config{Limits: []sluice.Limit{{Rate: 0, Period: time.Second}}}, sluice.ErrInvalidLimit},
		{"shared state", store, sluice.Config{Limits: []sluice.Limit{sluice.PerSecond(1), sluice.PerSecond(2)}}, sluice.ErrInvalidRequest},
		{"long action", store, sluice.Config{Action: strings.Repeat("a", 200), Limits: []sluice.Limit{sluice.PerSecond(1)}}, sluice.ErrInvalidRequest},
		{"long namespace", store, sluice.Config{Namespace: strings.Repeat("n", 200), Limits: []sluice.Limit{sluice.PerSecond(1)}}, sluice.ErrInvalidRequest},
	}
	for _, tt := range tests {
		if _, err := sluice.New(tt.store, tt.c); !errors.Is(err, tt.want) {
			t.Errorf("%s: New = %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestLimiterAllowPeekReset(t *testing.T) {
	ctx := context.Background()
	lim, clk := newLimiter(t, sluice.Config{Action: "login", Limits: []sluice.Limit{sluice.PerMinute(3)}})
	for i := range 3 {
		if d, err := lim.Peek(ctx, "alice"); err != nil || !d.Allowed || d.Remaining != 2-i {
			t.Fatalf("Peek before take %d = %+v, %v; want allowed, Remaining %d", i, d, err, 2-i)
		}
		if d, err := lim.Allow(ctx, "alice"); err != nil || !d.Allowed {
			t.Fatalf("Allow %d = %+v, %v; want allowed", i, d, err)
		}
	}
	d, err := lim.Allow(ctx, "alice")
	if err != nil || d.Allowed || d.RetryAfter != 20*time.Second {
		t.Fatalf("Allow over the limit = %+v, %v; want denied, RetryAfter 20s", d, err)
	}
	if d, _ := lim.Allow(ctx, "bob"); !d.Allowed {
		t.Error("another actor was limited by alice's takes")
	}
	clk.Advance(d.RetryAfter)
	if d, _ := lim.Allow(ctx, "alice"); !d.Allowed {
		t.Error("denied after waiting RetryAfter")
	}
	if err := lim.Reset(ctx, "alice"); err != nil {
		t.Fatalf("Reset = %v", err)
	}
	if d, _ := lim.AllowN(ctx, "alice", 3); !d.Allowed {
		t.Error("a full burst denied after Reset")
	}
	if _, err := lim.AllowN(ctx, "alice", 4); !errors.Is(err, sluice.ErrCostExceedsBurst) {
		t.Errorf("AllowN(4) over a burst of 3 = %v, want ErrCostExceedsBurst", err)
	}
	if _, err := lim.AllowN(ctx, "alice", 0); !errors.Is(err, sluice.ErrInvalidRequest) {
		t.Errorf("AllowN(0) = %v, want ErrInvalidRequest", err)
	}
}

// TestLimiterInsert checks penalties and rewards through a Limiter: a
// penalty counts though over the limit, its wait is bounded by the time
// to refill, and a reward gives back what was spent.
func TestLimiterInsert(t *testing.T) {
	ctx := context.Background()
	lim, clk := newLimiter(t, sluice.Config{Action: "login", Limits: []sluice.Limit{sluice.PerMinute(3)}})
	if d, err := lim.Insert(ctx, "mallory", 2); err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("Insert(2) = %+v, %v; want allowed, 0 remaining after a take of 1", d, err)
	}
	for range 5 {
		if d, err := lim.Insert(ctx, "mallory", 3); err != nil || d.Allowed {
			t.Fatalf("Insert(3) over the limit = %+v, %v; want counted and denied", d, err)
		}
	}
	d, _ := lim.Peek(ctx, "mallory")
	if d.RetryAfter > time.Minute {
		t.Errorf("RetryAfter %v after penalties: more than the minute the limit takes to refill", d.RetryAfter)
	}
	clk.Advance(d.RetryAfter)
	if d, _ := lim.Allow(ctx, "mallory"); !d.Allowed {
		t.Error("denied after waiting RetryAfter")
	}
	lim.AllowN(ctx, "alice", 3)
	if d, err := lim.Insert(ctx, "alice", -2); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Errorf("Insert(-2) after a full burst = %+v, %v; want allowed with 1 remaining", d, err)
	}
	if _, err := lim.Insert(ctx, "alice", 0); !errors.Is(err, sluice.ErrInvalidRequest) {
		t.Errorf("Insert(0) = %v, want ErrInvalidRequest", err)
	}
	if _, err := lim.Insert(ctx, "alice", -4); !errors.Is(err, sluice.ErrCostExceedsBurst) {
		t.Errorf("Insert(-4) = %v, want ErrCostExceedsBurst", err)
	}
}

// TestLimiterResume checks that a reservation resumed from its actor,
// cost and time refunds as the original would.
func TestLimiterResume(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLimiter(t, sluice.Config{Limits: []sluice.Limit{sluice.PerMinute(3)}})
	r, err := lim.Reserve(ctx, "alice", 2)
	if err != nil || !r.Allowed {
		t.Fatalf("Reserve = %+v, %v", r, err)
	}
	if err := lim.Resume("alice", 2, r.Time).Refund(ctx); err != nil {
		t.Fatalf("resumed Refund = %v", err)
	}
	if d, _ := lim.AllowN(ctx, "alice", 3); !d.Allowed {
		t.Error("a full burst denied after the resumed refund")
	}
}

func TestLimiterActionsAndNamespacesDoNotShare(t *testing.T) {
	ctx := context.Background()
	store := memory.New(memory.Config{})
	defer store.Close()
	one := []sluice.Limit{sluice.PerHour(1)}
	a, _ := sluice.New(store, sluice.Config{Action: "login", Limits: one})
	b, _ := sluice.New(store, sluice.Config{Action: "invite", Limits: one})
	c, _ := sluice.New(store, sluice.Config{Action: "login", Namespace: "other", Limits: one})
	for _, lim := range []*sluice.Limiter{a, b, c} {
		if d, err := lim.Allow(ctx, "x"); err != nil || !d.Allowed {
			t.Errorf("first take of a separate limiter = %+v, %v; want allowed", d, err)
		}
	}
}

func TestLimiterOddKeys(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLimiter(t, sluice.Config{Limits: []sluice.Limit{sluice.PerHour(1)}})
	long := strings.Repeat("x", 1<<20)
	for _, k := range []string{"", "\x00", "#hash", long, long + "y", "{tag}", "é\xff"} {
		if d, err := lim.Allow(ctx, k); err != nil || !d.Allowed {
			t.Errorf("first take of %.10q = %+v, %v; want allowed (keys must not collide)", k, d, err)
		}
		if d, err := lim.Allow(ctx, k); err != nil || d.Allowed {
			t.Errorf("second take of %.10q = %+v, %v; want denied", k, d, err)
		}
	}
}

// TestLimiterAdmit checks Admit against Allow on every path a Limiter
// takes: a Bound that is an Admitter (the memory store's, on its own
// clock and on the Limiter's), none (SafeToForget, whose requests skip
// the Bound), and a store that is no Binder. Admit and Allow count
// against the same state: a burst taken by Admit leaves Allow denied
// with the wait Allow reports, and the reverse.
func TestLimiterAdmit(t *testing.T) {
	ctx := context.Background()
	mem := memory.New(memory.Config{})
	t.Cleanup(func() { mem.Close() })
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	limits := []sluice.Limit{sluice.PerMinute(3)}
	for _, c := range []struct {
		name  string
		store sluice.Store
		c     sluice.Config
	}{
		{"bound, store clock", mem, sluice.Config{Action: "a", Limits: limits}},
		{"bound, limiter clock", mem, sluice.Config{Action: "b", Limits: limits, Clock: clk.Now}},
		{"not bound", mem, sluice.Config{Action: "c", Limits: limits, SafeToForget: true}},
		{"no binder", struct{ sluice.Store }{mem}, sluice.Config{Action: "d", Limits: limits}},
		{"two limits", mem, sluice.Config{Action: "e", Limits: append(limits, sluice.PerHour(5))}},
	} {
		lim, err := sluice.New(c.store, c.c)
		if err != nil {
			t.Fatalf("%s: New = %v", c.name, err)
		}
		for _, actor := range []string{"alice", "203.0.113.7", "#x", strings.Repeat("y", 1000)} {
			for i := range 3 {
				if ok, err := lim.Admit(ctx, actor); err != nil || !ok {
					t.Fatalf("%s: Admit %d of %.10q = %v, %v; want true", c.name, i+1, actor, ok, err)
				}
			}
			if ok, err := lim.Admit(ctx, actor); err != nil || ok {
				t.Fatalf("%s: Admit past the burst of %.10q = %v, %v; want false", c.name, actor, ok, err)
			}
			if d, err := lim.Allow(ctx, actor); err != nil || d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 20*time.Second {
				t.Fatalf("%s: Allow after Admit's burst of %.10q = %+v, %v; want denied, RetryAfter in (0, 20s]", c.name, actor, d, err)
			}
			if err := lim.Reset(ctx, actor); err != nil {
				t.Fatal(err)
			}
			if d, err := lim.AllowN(ctx, actor, 3); err != nil || !d.Allowed {
				t.Fatalf("%s: AllowN(3) after Reset of %.10q = %+v, %v; want allowed", c.name, actor, d, err)
			}
			if ok, err := lim.Admit(ctx, actor); err != nil || ok {
				t.Fatalf("%s: Admit after Allow's burst of %.10q = %v, %v; want false", c.name, actor, ok, err)
			}
		}
	}
}

func TestReservation(t *testing.T) {
	ctx := context.Background()
	lim, clk := newLimiter(t, sluice.Config{Action: "login", Limits: []sluice.Limit{sluice.PerMinute(2)}})

	// A refunded reservation gives its unit back, once.
	r, err := lim.Reserve(ctx, "alice", 1)
	if err != nil || !r.Allowed {
		t.Fatalf("Reserve = %+v, %v; want allowed", r, err)
	}
	if err := r.Refund(ctx); err != nil {
		t.Fatalf("Refund = %v", err)
	}
	if err := r.Refund(ctx); !errors.Is(err, sluice.ErrReservationDone) {
		t.Errorf("second Refund = %v, want ErrReservationDone", err)
	}
	if err := r.Commit(); !errors.Is(err, sluice.ErrReservationDone) {
		t.Errorf("Commit after Refund = %v, want ErrReservationDone", err)
	}
	if d, _ := lim.Peek(ctx, "alice"); d.Remaining != 1 {
		t.Errorf("after a refund, Peek Remaining = %d, want 1 (full allowance of 2, less the peek)", d.Remaining)
	}

	// Committed reservations count; while in flight they hold capacity.
	r1, _ := lim.Reserve(ctx, "alice", 1)
	r2, _ := lim.Reserve(ctx, "alice", 1)
	r3, err := lim.Reserve(ctx, "alice", 1)
	if !r1.Allowed || !r2.Allowed || err != nil || r3.Allowed {
		t.Fatalf("three reservations of a 2/min limit = %v, %v, %v (%v); want allowed, allowed, denied", r1.Allowed, r2.Allowed, r3.Allowed, err)
	}
	if err := r3.Refund(ctx); err != nil {
		t.Errorf("Refund of a denied reservation = %v, want nil (nothing was taken)", err)
	}
	if err := r1.Commit(); err != nil {
		t.Errorf("Commit = %v", err)
	}
	clk.Advance(10 * time.Second)
	if err := r2.Refund(ctx); err != nil {
		t.Errorf("later Refund = %v", err)
	}
	if d, _ := lim.Allow(ctx, "alice"); !d.Allowed {
		t.Error("the refunded unit was not given back")
	}
	if d, _ := lim.Allow(ctx, "alice"); d.Allowed {
		t.Error("refund gave back more than it took")
	}
}

func TestMultiLimitPolicy(t *testing.T) {
	ctx := context.Background()
	lim, clk := newLimiter(t, sluice.Config{Limits: []sluice.Limit{sluice.PerSecond(2), sluice.PerMinute(3)}})
	admitted := 0
	for range 10 {
		if d, _ := lim.Allow(ctx, "k"); d.Allowed {
			admitted++
		}
		clk.Advance(time.Second)
	}
	if admitted != 3 {
		t.Errorf("admitted %d over 10 s under 2/s and 3/min, want 3", admitted)
	}
	d, _ := lim.Allow(ctx, "k")
	if d.Allowed || d.Limit != sluice.PerMinute(3) {
		t.Errorf("binding decision = %+v, want denied by 3/min", d)
	}
}
