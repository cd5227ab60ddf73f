package fallback

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
)

// TestRefundJournaled kills a real redis-server, reserves takes that the
// local store allows, and checks both orders of a refund and the replay
// once Redis is back: a take refunded before its replay never reaches
// Redis, and a take refunded after its replay is refunded in Redis.
func TestRefundJournaled(t *testing.T) {
	o := newOutage(t)
	lim, inRedis := o.limiters(t, "login", sluice.Limit{Rate: 10, Period: time.Hour})
	ctx := context.Background()
	reserve := func(t *testing.T, actor string) *sluice.Reservation {
		t.Helper()
		r, err := lim.Reserve(ctx, actor, 1)
		if err != nil || !r.Allowed {
			t.Fatalf("Reserve(%q) = %+v, %v; want allowed", actor, r, err)
		}
		return r
	}
	refund := func(t *testing.T, r *sluice.Reservation) {
		t.Helper()
		if err := r.Refund(ctx); err != nil {
			t.Fatalf("Refund = %v, want nil", err)
		}
	}

	t.Run("refund before replay", func(t *testing.T) {
		o.kill(t)
		refunded, kept := reserve(t, "a"), reserve(t, "a")
		o.advance(time.Second)
		refund(t, refunded) // Redis still down
		before := o.s.Stats()
		o.restart(t)
		if got := o.s.Stats().Replayed - before.Replayed; got != 2 {
			t.Errorf("takes replayed = %d, want 2 (someone's and the kept one)", got)
		}
		if got := o.s.Stats().ReplayedRefunds - before.ReplayedRefunds; got != 0 {
			t.Errorf("refunds replayed = %d, want 0: the refund cancelled its journaled take", got)
		}
		if got, want := remaining(t, inRedis, "a"), 10-1-1; got != want {
			t.Errorf("Redis Remaining(a) = %d, want %d: only the kept take counts", got, want)
		}
		refund(t, kept) // replayed: Redis gives it back
		if got, want := remaining(t, inRedis, "a"), 10-1; got != want {
			t.Errorf("Redis Remaining(a) after refunding the kept take = %d, want %d", got, want)
		}
	})
	t.Run("refund after replay", func(t *testing.T) {
		o.kill(t)
		r := reserve(t, "b")
		o.restart(t)
		if got, want := remaining(t, inRedis, "b"), 10-1-1; got != want {
			t.Fatalf("Redis Remaining(b) after the replay = %d, want %d", got, want)
		}
		o.advance(time.Second)
		refund(t, r)
		if got, want := remaining(t, inRedis, "b"), 10-1; got != want {
			t.Errorf("Redis Remaining(b) after the refund = %d, want %d: the replayed take given back", got, want)
		}
	})
	if st := o.s.Stats(); st.ReplayFailed != 0 {
		t.Errorf("Stats = %+v, want no failed replay", st)
	}
}

// TestRefundDuringReplay refunds a take while its replay is on its way
// to the primary: the refund waits for the replay, then goes to the
// primary, so the take is counted once and given back once.
func TestRefundDuringReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := newFake(t)
		primary.set(failing)
		s := newStore(t, Config{Primary: primary, Policy: sluice.FailLocal, Threshold: 1, Cooldown: time.Second, DenyCache: -1})
		limits := []sluice.Limit{{Rate: 10, Period: time.Hour}}
		ctx := context.Background()
		take, err := s.Decide(ctx, sluice.Request{Key: "a", Limits: limits, Cost: 1, Now: t0})
		if err != nil || !take.Allowed || !s.Open() {
			t.Fatalf("take on a failing primary = %+v, %v, breaker open %v; want allowed locally, open", take, err, s.Open())
		}
		release := make(chan struct{})
		unblock := sync.OnceFunc(func() { close(release) })
		t.Cleanup(unblock) // before Close waits for the replay, if the test fails early
		primary.set(func(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
			if r.Key == "a" && r.Op == sluice.OpTake {
				<-release // the replay of a's take, held in flight
			}
			return primary.mem.Decide(ctx, r)
		})
		later := t0.Add(2 * time.Second)
		if _, err := s.Decide(ctx, sluice.Request{Key: "probe", Limits: limits, Op: sluice.OpPeek, Cost: 1, Now: later}); err != nil || s.Open() {
			t.Fatalf("probe = %v, breaker open %v; want closed", err, s.Open())
		}
		synctest.Wait() // the replay holds a's take in flight
		done := make(chan error, 1)
		go func() {
			_, err := s.Decide(ctx, sluice.Request{Key: "a", Limits: limits, Op: sluice.OpRefund, Cost: 1, At: take.Time, Now: later})
			done <- err
		}()
		synctest.Wait() // the refund waits for the replay
		select {
		case err := <-done:
			t.Fatalf("refund returned (%v) while its take was being replayed, want it to wait", err)
		default:
		}
		if got := primary.calls.Load(); got != 2+1 { // failed take, probe, replay
			t.Errorf("primary calls = %d, want 3: the refund must not reach it before the replay", got)
		}
		unblock()
		if err := <-done; err != nil {
			t.Fatalf("refund = %v", err)
		}
		s.replayWG.Wait()
		p, err := primary.mem.Decide(ctx, sluice.Request{Key: "a", Limits: limits, Op: sluice.OpPeek, Cost: 1, Now: later})
		if err != nil || p.Remaining != 10-1 {
			t.Errorf("primary Remaining(a) = %d (%v), want %d: the take replayed, then refunded", p.Remaining, err, 10-1)
		}
		if st := s.Stats(); st.Replayed != 1 {
			t.Errorf("Stats.Replayed = %d, want 1", st.Replayed)
		}
	})
}
