package fallback

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
)

var (
	hourly = sluice.Limit{Rate: 10, Period: time.Hour}
	daily  = sluice.Limit{Rate: 100, Period: 24 * time.Hour}
)

// op returns a journaled operation of actor (prefix "p:" unless actor
// has its own, "q:a") under limits.
func op(o sluice.Op, actor string, limits ...sluice.Limit) sluice.Request {
	prefix := "p:"
	if len(actor) > 2 && actor[1] == ':' {
		prefix, actor = actor[:2], actor[2:]
	}
	return sluice.Request{Prefix: prefix, Key: actor, Limits: limits, Op: o, Cost: 1, Now: t0}
}

// describe lists ops as "take p:a 1h0m0s,24h0m0s", to compare them.
func describe(ops []sluice.Request) []string {
	var out []string
	for _, o := range ops {
		var periods []string
		for _, l := range o.Limits {
			periods = append(periods, l.Period.String())
		}
		out = append(out, fmt.Sprintf("%v %s%s %v", o.Op, o.Prefix, o.Key, periods))
	}
	return out
}

// TestJournalWipe checks what a reset leaves of the operations waiting
// in the journal: the actor's operations lose the limits it resets, and
// go when none is left; other actors' stay, in order.
func TestJournalWipe(t *testing.T) {
	journaled := func() []sluice.Request {
		return []sluice.Request{
			op(sluice.OpTake, "a", hourly),
			op(sluice.OpRefund, "a", hourly),
			op(sluice.OpTake, "b", hourly),
			op(sluice.OpReset, "a", hourly),
			op(sluice.OpTake, "a", hourly, daily),
			op(sluice.OpTake, "q:a", hourly),
			op(sluice.OpTake, "a", daily),
		}
	}
	for _, tc := range []struct {
		name  string
		reset sluice.Request
		want  []string
	}{
		{"one limit", op(sluice.OpReset, "a", hourly), []string{
			"take p:b [1h0m0s]", "take p:a [24h0m0s]", "take q:a [1h0m0s]", "take p:a [24h0m0s]"}},
		{"every limit", op(sluice.OpReset, "a", daily, hourly), []string{
			"take p:b [1h0m0s]", "take q:a [1h0m0s]"}},
		{"same state, other rate", op(sluice.OpReset, "b", sluice.Limit{Rate: 3, Period: time.Hour}), []string{
			"take p:a [1h0m0s]", "refund p:a [1h0m0s]", "reset p:a [1h0m0s]", "take p:a [1h0m0s 24h0m0s]", "take q:a [1h0m0s]", "take p:a [24h0m0s]"}},
		{"other actor", op(sluice.OpReset, "c", hourly, daily), describe(journaled())},
		{"other algorithm", op(sluice.OpReset, "a", sluice.Limit{Rate: 10, Period: time.Hour, Algorithm: sluice.FixedWindow}), describe(journaled())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := journal{max: 100}
			ops := journaled()
			both := ops[4].Limits
			for _, o := range ops {
				j.add(o)
			}
			if err := j.wipe(context.Background(), &tc.reset); err != nil {
				t.Fatalf("wipe = %v", err)
			}
			if got := describe(j.ops); !slices.Equal(got, tc.want) {
				t.Errorf("journal after %v = %q, want %q", describe([]sluice.Request{tc.reset}), got, tc.want)
			}
			if got := j.waiting.Load(); got != int64(len(tc.want)) {
				t.Errorf("waiting = %d, want %d", got, len(tc.want))
			}
			if !slices.Equal(both, []sluice.Limit{hourly, daily}) {
				t.Errorf("the caller's limits became %v, want them untouched", both)
			}
		})
	}
}

// TestJournalBound checks that resets and refunds share MaxReplay with
// the takes: the oldest operations go first, and are counted.
func TestJournalBound(t *testing.T) {
	j := journal{max: 2}
	for _, o := range []sluice.Request{op(sluice.OpTake, "a", hourly), op(sluice.OpReset, "b", hourly), op(sluice.OpRefund, "c", hourly)} {
		j.add(o)
	}
	if got, want := describe(j.ops), []string{"reset p:b [1h0m0s]", "refund p:c [1h0m0s]"}; !slices.Equal(got, want) || j.dropped.Load() != 1 {
		t.Errorf("journal = %q, dropped %d; want %q, dropped 1", got, j.dropped.Load(), want)
	}
}

// TestResetDuringReplay resets an actor while the replay is sending
// other operations to the primary. A reset of an actor whose take is in
// the batch on its way waits for it, then reaches the primary after it;
// a reset of an actor whose take still waits drops the take and does not
// wait. Either way the primary ends with the actor reset.
func TestResetDuringReplay(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before int  // takes of others journaled before a's
		waits  bool // whether the reset waits for the batch in flight
		takes  int  // a's takes the primary gets
	}{
		{"take in flight", 0, true, 1},
		{"take waiting", replayBatch, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				primary := newFake(t)
				primary.set(failing)
				s := newStore(t, Config{Primary: primary, Policy: sluice.FailLocal, Threshold: 1, Cooldown: time.Second, DenyCache: -1})
				ctx := context.Background()
				many := []sluice.Limit{{Rate: 1000, Period: time.Hour}}
				for i := range tc.before {
					if _, err := s.Decide(ctx, sluice.Request{Key: "x", Limits: many, Cost: 1, Now: t0}); err != nil {
						t.Fatalf("take %d of x = %v", i, err)
					}
				}
				take, err := s.Decide(ctx, sluice.Request{Key: "a", Limits: []sluice.Limit{hourly}, Cost: 1, Now: t0})
				if err != nil || !take.Allowed || !s.Open() {
					t.Fatalf("take of a on a failing primary = %+v, %v, breaker open %v; want allowed locally, open", take, err, s.Open())
				}
				release := make(chan struct{})
				unblock := sync.OnceFunc(func() { close(release) })
				t.Cleanup(unblock) // before Close waits for the replay, if the test fails early
				var held, takesOfA atomic.Int64
				primary.set(func(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
					if r.Op == sluice.OpTake && r.Key == "a" {
						takesOfA.Add(1)
					}
					if r.Op == sluice.OpTake && r.Key != "probe" && held.Add(1) == 1 {
						<-release // the batch's first take, held in flight
					}
					return primary.mem.Decide(ctx, r)
				})
				later := t0.Add(2 * time.Second)
				if _, err := s.Decide(ctx, sluice.Request{Key: "probe", Limits: many, Op: sluice.OpPeek, Cost: 1, Now: later}); err != nil || s.Open() {
					t.Fatalf("probe = %v, breaker open %v; want closed", err, s.Open())
				}
				synctest.Wait() // the replay holds its first take in flight
				done := make(chan error, 1)
				go func() {
					_, err := s.Decide(ctx, sluice.Request{Key: "a", Limits: []sluice.Limit{hourly}, Op: sluice.OpReset, Now: later})
					done <- err
				}()
				synctest.Wait()
				select {
				case err := <-done:
					if tc.waits {
						t.Fatalf("reset returned (%v) while a's take was being replayed, want it to wait", err)
					} else if err != nil {
						t.Fatalf("reset = %v", err)
					}
				default:
					if !tc.waits {
						t.Fatal("reset waits for a batch that does not hold a's take, want it to return")
					}
				}
				unblock()
				if tc.waits {
					if err := <-done; err != nil {
						t.Fatalf("reset = %v", err)
					}
				}
				s.replayWG.Wait()
				p, err := primary.mem.Decide(ctx, sluice.Request{Key: "a", Limits: []sluice.Limit{hourly}, Op: sluice.OpPeek, Cost: 1, Now: later})
				if err != nil || p.Remaining != 10-1 {
					t.Errorf("primary Remaining(a) = %d (%v), want %d: reset after its take", p.Remaining, err, 10-1)
				}
				if got := takesOfA.Load(); got != int64(tc.takes) {
					t.Errorf("takes of a the primary got = %d, want %d", got, tc.takes)
				}
				if st := s.Stats(); st.Replayed != int64(tc.before+tc.takes) || st.ReplayFailed != 0 {
					t.Errorf("Stats = %+v, want %d replayed, none failed", st, tc.before+tc.takes)
				}
			})
		})
	}
}

// TestResetTransientFailure fails one reset, too few failures to open
// the breaker: the reset is journaled and replayed as soon as the
// primary answers again, not after some later outage.
func TestResetTransientFailure(t *testing.T) {
	primary := newFake(t)
	s := newStore(t, Config{Primary: primary, Policy: sluice.FailLocal, DenyCache: -1})
	ctx := context.Background()
	decide := func(key string, o sluice.Op) {
		t.Helper()
		if _, err := s.Decide(ctx, sluice.Request{Key: key, Limits: []sluice.Limit{hourly}, Op: o, Cost: 1, Now: t0}); err != nil {
			t.Fatalf("Decide(%s %s) = %v", o, key, err)
		}
	}
	for range 3 {
		decide("a", sluice.OpTake)
	}
	primary.set(failing)
	decide("a", sluice.OpReset) // fails once: reset locally, journaled
	primary.set(nil)
	decide("b", sluice.OpTake) // answered: the replay starts
	s.replayWG.Wait()
	if st := s.Stats(); s.Open() || st.Errors != 1 || st.ReplayedResets != 1 {
		t.Errorf("Stats = %+v, breaker open %v; want 1 error, breaker closed, the reset replayed", st, s.Open())
	}
	p, err := primary.mem.Decide(ctx, sluice.Request{Key: "a", Limits: []sluice.Limit{hourly}, Op: sluice.OpPeek, Cost: 1, Now: t0})
	if err != nil || p.Remaining != 10-1 {
		t.Errorf("primary Remaining(a) = %d (%v), want %d: the 3 takes reset", p.Remaining, err, 10-1)
	}
}
