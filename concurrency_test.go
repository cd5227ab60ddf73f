package sluice_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/internal/testing/leasetest"
	"github.com/sluicehq/sluice/internal/testing/loadsim"
	"github.com/sluicehq/sluice/store/memory"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newConcurrency returns a Concurrency of c on a memory store whose clock
// is now: granting leases by ref, unless the test's name ends in
// "/byID", where the store is seen as a LeaseStore only, as the shared
// stores are.
func newConcurrency(t *testing.T, c sluice.ConcurrencyConfig, now func() time.Time) *sluice.Concurrency {
	t.Helper()
	s := memory.New(memory.Config{Clock: now, SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	if c.Clock == nil {
		c.Clock = now
	}
	var store sluice.LeaseStore = s
	if strings.HasSuffix(t.Name(), "/byID") {
		store = struct{ sluice.LeaseStore }{s}
	}
	con, err := sluice.NewConcurrency(store, c)
	if err != nil {
		t.Fatal(err)
	}
	return con
}

func acquire(t *testing.T, c *sluice.Concurrency, key string, cl sluice.Class, want bool) *sluice.Lease {
	t.Helper()
	l, err := c.Acquire(t.Context(), key, cl)
	if err != nil {
		t.Fatalf("Acquire(%q, %v) error: %v", key, cl, err)
	}
	if l.Allowed != want {
		t.Fatalf("Acquire(%q, %v).Allowed = %v, want %v (%+v)", key, cl, l.Allowed, want, l.LeaseDecision)
	}
	return l
}

// bothPaths runs f on a store that grants leases by ref and on one that
// grants them by ID.
func bothPaths(t *testing.T, f func(t *testing.T)) {
	t.Run("byRef", f)
	t.Run("byID", f)
}

// TestConcurrencyLeases walks a limit of 2 through acquire, release,
// extend and expiry on a fake clock.
func TestConcurrencyLeases(t *testing.T) { bothPaths(t, testConcurrencyLeases) }

func testConcurrencyLeases(t *testing.T) {
	clk := &clock{now: t0}
	c := newConcurrency(t, sluice.ConcurrencyConfig{Limit: 2, TTL: 10 * time.Second, Adaptive: unbound{}}, clk.Now)
	a := acquire(t, c, "k", sluice.ClassCritical, true)
	b := acquire(t, c, "k", sluice.ClassCritical, true)
	d := acquire(t, c, "k", sluice.ClassCritical, false)
	if d.RetryAfter != 10*time.Second || d.InUse != 2 || d.ID() != "" {
		t.Errorf("denial = %+v, want RetryAfter 10s, InUse 2, no ID", d.LeaseDecision)
	}
	acquire(t, c, "other", sluice.ClassCritical, true)
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(t.Context()); err != nil {
		t.Errorf("second Release = %v, want nil", err)
	}
	if err := d.Release(t.Context()); err != nil {
		t.Errorf("Release of a denial = %v, want nil", err)
	}
	acquire(t, c, "k", sluice.ClassCritical, true) // a's place
	clk.Advance(9 * time.Second)
	if ok, err := b.Extend(t.Context()); !ok || err != nil {
		t.Errorf("Extend = %v, %v; want true, nil", ok, err)
	}
	clk.Advance(time.Second) // the lease that replaced a expires; b does not
	acquire(t, c, "k", sluice.ClassCritical, true)
	acquire(t, c, "k", sluice.ClassCritical, false)
	clk.Advance(10 * time.Second) // b was never released: its lease ends
	if ok, _ := b.Extend(t.Context()); ok {
		t.Error("Extend of an expired lease = true")
	}
	acquire(t, c, "k", sluice.ClassCritical, true)
	if got := c.InFlight(); got != 5 {
		t.Errorf("InFlight = %d, want 5 (held by this process, expired or not, until released)", got)
	}
}

// TestShares checks each class's ceiling: the share of the capacity below
// which it is admitted.
func TestShares(t *testing.T) {
	tests := []struct {
		shares                   sluice.Shares
		limit                    int
		critical, def, sheddable int
	}{
		{sluice.Shares{}, 10, 10, 8, 5},
		{sluice.Shares{}, 1, 1, 1, 1},
		{sluice.Shares{}, 3, 3, 3, 2},
		{sluice.Shares{}, 100, 100, 80, 50},
		{sluice.Shares{Sheddable: 0.9, CriticalReserve: 0.5}, 10, 10, 5, 5},
		{sluice.Shares{Sheddable: 1, CriticalReserve: 0.01}, 10, 10, 10, 10},
	}
	for _, tt := range tests {
		got := [3]int{tt.shares.Ceiling(sluice.ClassCritical, tt.limit), tt.shares.Ceiling(sluice.ClassDefault, tt.limit), tt.shares.Ceiling(sluice.ClassSheddable, tt.limit)}
		if want := [3]int{tt.critical, tt.def, tt.sheddable}; got != want {
			t.Errorf("%+v.Ceiling(critical, default, sheddable; %d) = %v, want %v", tt.shares, tt.limit, got, want)
		}
	}
	for _, s := range []sluice.Shares{{Sheddable: 1.5}, {Sheddable: -1}, {CriticalReserve: 1}, {CriticalReserve: -0.1}} {
		if _, err := sluice.NewConcurrency(memory.New(memory.Config{}), sluice.ConcurrencyConfig{Limit: 1, Shares: s}); !errors.Is(err, sluice.ErrInvalidRequest) {
			t.Errorf("NewConcurrency with shares %+v: error %v, want ErrInvalidRequest", s, err)
		}
	}
}

// TestClassesUnderPressure fills a limit of 10 and checks who is still
// admitted: sheddable below 5 in use, default below 8, critical to 10.
func TestClassesUnderPressure(t *testing.T) {
	clk := &clock{now: t0}
	c := newConcurrency(t, sluice.ConcurrencyConfig{Limit: 10}, clk.Now)
	for range 5 {
		acquire(t, c, "k", sluice.ClassSheddable, true)
	}
	acquire(t, c, "k", sluice.ClassSheddable, false)
	for range 3 {
		acquire(t, c, "k", sluice.ClassDefault, true)
	}
	acquire(t, c, "k", sluice.ClassDefault, false)
	acquire(t, c, "k", sluice.ClassSheddable, false)
	for range 2 {
		acquire(t, c, "k", sluice.ClassCritical, true)
	}
	acquire(t, c, "k", sluice.ClassCritical, false)
	if _, err := c.Acquire(t.Context(), "k", sluice.Class(9)); !errors.Is(err, sluice.ErrInvalidRequest) {
		t.Errorf("Acquire of class 9: error %v, want ErrInvalidRequest", err)
	}
}

// TestShedding overloads a server of capacity 10 with 90 clients, a third
// of each class, through a limit of 10 in flight (the pressure is the
// concurrency in use), in simulated time: the critical class keeps at
// least its reserved share (20%) of the successful requests, and the
// sheddable class is cut first.
func TestShedding(t *testing.T) {
	for _, tt := range []struct {
		name     string
		limit    int
		adaptive bool
	}{
		{"static", 10, false},
		{"adaptive", sluice.MaxLeases, true}, // the store's limit never binds: the adaptive one does
	} {
		t.Run(tt.name, func(t *testing.T) {
			var sim *loadsim.Sim
			now := func() time.Time { return sim.Now() }
			cfg := sluice.ConcurrencyConfig{Limit: tt.limit}
			if tt.adaptive {
				v, err := adaptive.NewVegas(adaptive.VegasConfig{})
				if err != nil {
					t.Fatal(err)
				}
				cfg.Adaptive = v
			}
			c := newConcurrency(t, cfg, now)
			classOf := func(client int) sluice.Class { return sluice.Class(client % 3) }
			admit := func(_ time.Time, client int) (func(time.Time, bool), bool) {
				l, err := c.Acquire(context.Background(), "api", classOf(client))
				if err != nil {
					t.Fatal(err)
				}
				return func(_ time.Time, dropped bool) {
					if dropped {
						l.Drop()
					}
					if err := l.Release(context.Background()); err != nil {
						t.Error(err)
					}
				}, l.Allowed
			}
			sim = loadsim.New(t0, loadsim.Config{Capacity: 10, Work: 50 * time.Millisecond, Clients: 90,
				Think: 5 * time.Millisecond, Timeout: 250 * time.Millisecond, Tick: time.Millisecond}, admit)
			sim.Run(5 * time.Second)
			stats, _ := sim.Run(10 * time.Second)
			var done, tried [3]int
			for i, s := range stats {
				done[classOf(i)] += s.Completed
				tried[classOf(i)] += s.Completed + s.Refused + s.Dropped
			}
			total := done[0] + done[1] + done[2]
			t.Logf("completed default %d, critical %d, sheddable %d of %d tries each",
				done[sluice.ClassDefault], done[sluice.ClassCritical], done[sluice.ClassSheddable], tried[0])
			if float64(done[sluice.ClassCritical]) < 0.2*float64(total) || total < 1500 {
				t.Errorf("critical completed %d of %d, want at least 20%% of at least 1500", done[sluice.ClassCritical], total)
			}
			if !(done[sluice.ClassSheddable] < done[sluice.ClassDefault] && done[sluice.ClassDefault] < done[sluice.ClassCritical]) {
				t.Errorf("completed sheddable %d, default %d, critical %d: want sheddable cut first, then default",
					done[sluice.ClassSheddable], done[sluice.ClassDefault], done[sluice.ClassCritical])
			}
		})
	}
}

// TestWaitFIFO queues waiters on a full key and checks that they are
// served in arrival order as the holder's place is passed along, in a
// synctest bubble whose clock moves only when every goroutine waits.
func TestWaitFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newConcurrency(t, sluice.ConcurrencyConfig{Limit: 1, TTL: time.Hour, Poll: time.Second}, time.Now)
		holder := acquire(t, c, "k", sluice.ClassDefault, true)
		const n = 8
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				l, err := c.Wait(t.Context(), "k", sluice.ClassDefault)
				if err != nil || !l.Allowed {
					t.Errorf("waiter %d: %+v, %v", i, l, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				if err := l.Release(t.Context()); err != nil {
					t.Error(err)
				}
			})
			synctest.Wait() // waiter i is queued before i+1 starts
		}
		acquire(t, c, "k", sluice.ClassDefault, false) // no overtaking of the queue
		start := time.Now()
		if err := holder.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; fmt.Sprint(order) != fmt.Sprint(want) {
			t.Errorf("served in order %v, want %v", order, want)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("waiters took %v of the bubble's time, want 0: each release wakes the next at once", d)
		}
	})
}

// TestWaitBounded: a waiter whose context ends gets a denial and no
// error; a waiter for a place another process frees (here, by expiry)
// gets it within one Poll.
func TestWaitBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newConcurrency(t, sluice.ConcurrencyConfig{Limit: 1, TTL: 10 * time.Second, Poll: 100 * time.Millisecond}, time.Now)
		acquire(t, c, "k", sluice.ClassCritical, true) // never released: a crashed holder
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		start := time.Now()
		l, err := c.Wait(ctx, "k", sluice.ClassCritical)
		if err != nil || l.Allowed || time.Since(start) != 3*time.Second {
			t.Errorf("Wait until the deadline = %+v, %v after %v; want a denial, nil, after 3s", l.LeaseDecision, err, time.Since(start))
		}
		l, err = c.Wait(t.Context(), "k", sluice.ClassCritical)
		if err != nil || !l.Allowed {
			t.Fatalf("Wait for the expiry = %+v, %v", l.LeaseDecision, err)
		}
		if waited := time.Since(start); waited < 10*time.Second || waited > 10*time.Second+100*time.Millisecond {
			t.Errorf("granted after %v, want within a Poll of the expiry at 10s", waited)
		}
	})
}

// TestAdaptiveShedsLocally: with an adaptive limit of 10, this process
// admits sheddable requests below 5 of its own in flight, whatever the
// store's limit.
func TestAdaptiveShedsLocally(t *testing.T) {
	clk := &clock{now: t0}
	a, err := adaptive.NewAIMD(adaptive.AIMDConfig{Initial: 10})
	if err != nil {
		t.Fatal(err)
	}
	c := newConcurrency(t, sluice.ConcurrencyConfig{Limit: 1000, Adaptive: a}, clk.Now)
	for i := range 5 {
		acquire(t, c, fmt.Sprint("key", i), sluice.ClassSheddable, true)
	}
	l := acquire(t, c, "another", sluice.ClassSheddable, false)
	if !l.Adaptive || l.Limit != 10 || l.InUse != 5 {
		t.Errorf("adaptive denial = %+v, Adaptive %v; want Adaptive, Limit 10, InUse 5", l.LeaseDecision, l.Adaptive)
	}
	for range 5 {
		acquire(t, c, "another", sluice.ClassCritical, true)
	}
	acquire(t, c, "yet another", sluice.ClassCritical, false)
}

func TestNewConcurrencyInvalid(t *testing.T) {
	s := memory.New(memory.Config{})
	defer s.Close()
	for _, c := range []sluice.ConcurrencyConfig{
		{}, {Limit: -1}, {Limit: sluice.MaxLeases + 1}, {Limit: 1, TTL: -time.Second}, {Limit: 1, TTL: 48 * time.Hour},
		{Limit: 1, Action: string(make([]byte, 200))},
	} {
		if _, err := sluice.NewConcurrency(s, c); !errors.Is(err, sluice.ErrInvalidRequest) {
			t.Errorf("NewConcurrency(%+v) error = %v, want ErrInvalidRequest", c, err)
		}
	}
	if _, err := sluice.NewConcurrency(nil, sluice.ConcurrencyConfig{Limit: 1}); !errors.Is(err, sluice.ErrInvalidRequest) {
		t.Errorf("NewConcurrency(nil) error = %v", err)
	}
}

// TestDetach: a lease handed over by ID no longer counts in this
// process, and is ended by ReleaseID (or renewed by ExtendID) with its ID.
func TestDetach(t *testing.T) { bothPaths(t, testDetach) }

func testDetach(t *testing.T) {
	clk := &clock{now: t0}
	c := newConcurrency(t, sluice.ConcurrencyConfig{Limit: 1, TTL: 10 * time.Second, Adaptive: unbound{}}, clk.Now)
	l := acquire(t, c, "k", sluice.ClassDefault, true)
	id := l.Detach()
	if !regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`).MatchString(id) {
		t.Errorf("lease ID %q: want 22 characters of base64url (it travels in JSON)", id)
	}
	if id == "" || c.InFlight() != 0 || l.Detach() != "" {
		t.Fatalf("Detach = %q, InFlight %d; want the ID once, 0 in flight", id, c.InFlight())
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	acquire(t, c, "k", sluice.ClassDefault, false) // Release after Detach did nothing
	clk.Advance(9 * time.Second)
	if d, err := c.ExtendID(t.Context(), "k", id); err != nil || !d.Allowed || !d.Expires.Equal(t0.Add(19*time.Second)) {
		t.Errorf("ExtendID = %+v, %v", d, err)
	}
	if d, err := c.ReleaseID(t.Context(), "k", id); err != nil || !d.Allowed || d.InUse != 0 {
		t.Errorf("ReleaseID = %+v, %v", d, err)
	}
	if d, err := c.ReleaseID(t.Context(), "k", id); err != nil || d.Allowed {
		t.Errorf("second ReleaseID = %+v, %v; want not live", d, err)
	}
	acquire(t, c, "k", sluice.ClassDefault, true)
}

// TestLeaseIDs: the IDs of one process's leases are 128 random bits
// each, and a holder who knows its own lease's ID and tries forgeries of
// it (its neighbours, random IDs of every length and alphabet) releases
// and extends nothing: not the leases granted just before and after its
// own, not a lease of another key or of another action on the same
// store, not its own once released.
func TestLeaseIDs(t *testing.T) { bothPaths(t, testLeaseIDs) }

func testLeaseIDs(t *testing.T) {
	s := memory.New(memory.Config{SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	var store sluice.LeaseStore = s
	if strings.HasSuffix(t.Name(), "/byID") {
		store = struct{ sluice.LeaseStore }{s}
	}
	newCon := func(action string) *sluice.Concurrency {
		c, err := sluice.NewConcurrency(store, sluice.ConcurrencyConfig{Limit: 64, TTL: time.Minute, Action: action})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c, other := newCon("reports"), newCon("exports")
	var ids []string
	for range 32 {
		id := acquire(t, c, "k", sluice.ClassCritical, true).Detach()
		raw, err := base64.RawURLEncoding.DecodeString(id)
		if err != nil || len(raw) != 16 || slices.Contains(ids, id) {
			t.Fatalf("lease ID %q: want 16 new bytes in base64url (%v)", id, err)
		}
		for _, prev := range ids {
			if n := commonPrefix(prev, id); n >= 8 {
				t.Fatalf("lease IDs %q and %q share %d leading characters: not drawn independently", prev, id, n)
			}
		}
		ids = append(ids, id)
	}
	mine := ids[0]
	theirs := []string{acquire(t, c, "k2", sluice.ClassCritical, true).Detach(), acquire(t, other, "k", sluice.ClassCritical, true).Detach()}
	refused := func(what string, d sluice.LeaseDecision, err error) {
		t.Helper()
		if d.Allowed || err != nil && !errors.Is(err, sluice.ErrInvalidRequest) || err == nil && d.InUse != 32 {
			t.Fatalf("%s = %+v, %v; want nothing released or extended, 32 in use", what, d, err)
		}
	}
	for _, f := range append(leasetest.Forgeries(mine), theirs...) {
		d, err := c.ReleaseID(t.Context(), "k", f)
		refused(fmt.Sprintf("ReleaseID(k, %q)", f), d, err)
		d, err = c.ExtendID(t.Context(), "k", f)
		refused(fmt.Sprintf("ExtendID(k, %q)", f), d, err)
	}
	for _, k := range []string{"k2", "K", "k\x00", ""} {
		if d, err := c.ReleaseID(t.Context(), k, mine); err != nil || d.Allowed {
			t.Fatalf("ReleaseID(%q, the ID of a lease of k) = %+v, %v; want nothing released", k, d, err)
		}
	}
	if d, err := other.ReleaseID(t.Context(), "k", mine); err != nil || d.Allowed || d.InUse != 1 {
		t.Fatalf("ReleaseID of another action = %+v, %v; want nothing released", d, err)
	}
	for i, id := range ids {
		if d, err := c.ReleaseID(t.Context(), "k", id); err != nil || !d.Allowed || d.InUse != 31-i {
			t.Fatalf("ReleaseID by holder %d after the forgeries = %+v, %v; want released, %d in use", i, d, err, 31-i)
		}
	}
	d, err := c.ReleaseID(t.Context(), "k", mine)
	if err != nil || d.Allowed {
		t.Fatalf("a replayed ReleaseID = %+v, %v; want nothing released", d, err)
	}
	if d, err = c.ExtendID(t.Context(), "k", mine); err != nil || d.Allowed {
		t.Fatalf("ExtendID of a released lease = %+v, %v; want not revived", d, err)
	}
}

// commonPrefix returns how many leading bytes a and b share.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// TestWaitFlood: a flood of waiters on one key is bounded: past
// MaxWaiters, Wait is refused at once; the queue drains when the waiters'
// contexts end.
func TestWaitFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newConcurrency(t, sluice.ConcurrencyConfig{Limit: 1, TTL: time.Hour, Poll: time.Hour}, time.Now)
		acquire(t, c, "k", sluice.ClassDefault, true)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for range sluice.MaxWaiters {
			wg.Go(func() { _, _ = c.Wait(ctx, "k", sluice.ClassDefault) })
		}
		synctest.Wait()
		start := time.Now()
		l, err := c.Wait(t.Context(), "k", sluice.ClassDefault)
		if err != nil || l.Allowed || time.Since(start) != 0 {
			t.Errorf("Wait past MaxWaiters = %+v, %v after %v; want refused at once", l.LeaseDecision, err, time.Since(start))
		}
		wctx, wcancel := context.WithTimeout(t.Context(), time.Second)
		defer wcancel()
		start = time.Now()
		if l, _ := c.Wait(wctx, "k", sluice.ClassCritical); l.Allowed || time.Since(start) != time.Second {
			t.Errorf("critical Wait beside a full default queue = %+v after %v, want to queue (its own) until its deadline, 1s",
				l.LeaseDecision, time.Since(start))
		}
		cancel()
		wg.Wait()
	})
}

// TestDo: Do runs its function holding a place, and only then; the place
// is free again when it returns, or panics. With an adaptive limit, Do
// goes through a Lease and counts it in flight; without, it counts
// nothing.
func TestDo(t *testing.T) {
	for _, adaptive := range []bool{false, true} {
		t.Run(fmt.Sprintf("adaptive=%v", adaptive), func(t *testing.T) {
			bothPaths(t, func(t *testing.T) { testDo(t, adaptive) })
		})
	}
}

func testDo(t *testing.T, adaptive bool) {
	clk := &clock{now: t0}
	cfg := sluice.ConcurrencyConfig{Limit: 1, TTL: 10 * time.Second}
	inside, after := -1, -1 // InFlight in f and after Do
	if adaptive {
		cfg.Adaptive = unbound{}
		inside, after = 1, 0
	}
	c := newConcurrency(t, cfg, clk.Now)
	ran := 0
	d, err := c.Do(t.Context(), "k", sluice.ClassCritical, func() {
		ran++
		if d, _ := c.Do(t.Context(), "k", sluice.ClassCritical, func() { ran += 10 }); d.Allowed || d.InUse != 1 {
			t.Errorf("Do while the place is held = %+v, want denied, 1 in use", d)
		}
		if c.InFlight() != inside {
			t.Errorf("InFlight inside Do = %d, want %d", c.InFlight(), inside)
		}
	})
	if err != nil || !d.Allowed || ran != 1 || d.InUse != 1 || !d.Expires.Equal(t0.Add(10*time.Second)) || !d.Time.Equal(t0) {
		t.Fatalf("Do = %+v, %v, ran %d; want allowed, 1 in use, expiring at %v, f run once", d, err, ran, t0.Add(10*time.Second))
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Do swallowed its function's panic")
			}
		}()
		c.Do(t.Context(), "k", sluice.ClassCritical, func() { panic("boom") })
	}()
	if c.InFlight() != after {
		t.Errorf("InFlight after Do = %d, want %d", c.InFlight(), after)
	}
	acquire(t, c, "k", sluice.ClassCritical, true) // free after the panic too
	if _, err := c.Do(t.Context(), "k", sluice.Class(99), func() { t.Error("f ran for an unknown class") }); !errors.Is(err, sluice.ErrInvalidRequest) {
		t.Errorf("Do with an unknown class: %v, want ErrInvalidRequest", err)
	}
}

// unbound is an adaptive limit that never binds, for the tests that count
// leases in flight (counted only with an adaptive limit).
type unbound struct{}

func (unbound) Limit() int                                  { return 1 << 30 }
func (unbound) Observe(time.Time, time.Duration, int, bool) {}

// TestDoAllocs: on a store of this process, Do allocates nothing.
func TestDoAllocs(t *testing.T) {
	s := memory.New(memory.Config{})
	defer s.Close()
	c, err := sluice.NewConcurrency(s, sluice.ConcurrencyConfig{Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	f := func() {}
	c.Do(t.Context(), "k", sluice.ClassCritical, f) // makes the table
	if n := testing.AllocsPerRun(1000, func() {
		if d, _ := c.Do(t.Context(), "k", sluice.ClassCritical, f); !d.Allowed {
			t.Fatal("denied")
		}
	}); n != 0 {
		t.Errorf("Do allocates %v times per call, want 0", n)
	}
}

// failingRelease is a LeaseStore whose releases fail.
type failingRelease struct{ sluice.LeaseStore }

func (failingRelease) Release(context.Context, sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return sluice.LeaseDecision{}, fmt.Errorf("%w: release refused", sluice.ErrStore)
}

// TestDoReleaseError: a release that fails is Do's error, after f ran.
func TestDoReleaseError(t *testing.T) {
	s := memory.New(memory.Config{})
	defer s.Close()
	c, err := sluice.NewConcurrency(failingRelease{s}, sluice.ConcurrencyConfig{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	d, err := c.Do(t.Context(), "k", sluice.ClassCritical, func() { ran = true })
	if !ran || !d.Allowed || !errors.Is(err, sluice.ErrStore) {
		t.Fatalf("Do = %+v, %v, ran %v; want allowed, ran, the release's ErrStore", d, err, ran)
	}
}
