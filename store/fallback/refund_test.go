package fallback

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testserver"
	"github.com/sluicehq/sluice/store/redis"
)

// TestRefundJournaled kills a real redis-server, reserves takes that the
// local store allows, and checks both orders of a refund and the replay
// once Redis is back: a take refunded before its replay never reaches
// Redis, and a take refunded after its replay is refunded in Redis.
func TestRefundJournaled(t *testing.T) {
	srv := testserver.StartRedis(t)
	// One connection: once a probe got through after the restart, every
	// later call does too (with several, each stale one fails once).
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true, PipelineMultiplex: -1})
	if err != nil {
		t.Fatalf("rueidis.NewClient = %v", err)
	}
	t.Cleanup(rc.Close)
	primary, err := redis.New(redis.Config{Client: rc})
	if err != nil {
		t.Fatalf("redis.New = %v", err)
	}
	var now atomic.Int64 // the clock of every request, on a 1s grid
	now.Store(t0.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	const cooldown = time.Second
	s := newStore(t, Config{Primary: primary, Threshold: 1, Cooldown: cooldown, Timeout: 2 * time.Second, Clock: clock, DenyCache: -1,
		OnError: func(err error) { t.Logf("primary failed (Redis killed): %v", err) }})
	limits := []sluice.Limit{{Rate: 10, Period: time.Hour}}
	cfg := sluice.Config{Limits: limits, Namespace: fmt.Sprintf("t%d", time.Now().UnixNano()), Action: "login", Clock: clock}
	lim, err := sluice.New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	inRedis, err := sluice.New(primary, cfg) // reads Redis alone
	if err != nil {
		t.Fatal(err)
	}
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
	// remaining is what a take of actor would leave in Redis.
	remaining := func(t *testing.T, actor string) int {
		t.Helper()
		d, err := inRedis.Peek(ctx, actor)
		if err != nil {
			t.Fatalf("Peek(%q) on Redis = %v", actor, err)
		}
		return d.Remaining
	}
	kill := func(t *testing.T) {
		t.Helper()
		srv.Stop()
		reserve(t, "someone") // fails on Redis, opens the breaker
		if !s.Open() {
			t.Fatal("breaker closed after Redis was killed, want open")
		}
	}
	// restart restarts Redis (empty) and probes it until the breaker
	// closes, then waits for the replay.
	restart := func(t *testing.T) {
		t.Helper()
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); s.Open(); {
			if time.Now().After(deadline) {
				t.Fatal("breaker still open 10s after Redis restarted")
			}
			now.Add(int64(cooldown)) // the next request probes
			if _, err := lim.Peek(ctx, "prober"); err != nil {
				t.Fatalf("Peek = %v", err)
			}
		}
		s.replayWG.Wait()
	}

	t.Run("refund before replay", func(t *testing.T) {
		kill(t)
		refunded, kept := reserve(t, "a"), reserve(t, "a")
		now.Add(int64(time.Second))
		refund(t, refunded) // Redis still down
		before := s.Stats().Replayed
		restart(t)
		if got := s.Stats().Replayed - before; got != 2 {
			t.Errorf("takes replayed = %d, want 2 (someone's and the kept one)", got)
		}
		if got, want := remaining(t, "a"), 10-1-1; got != want {
			t.Errorf("Redis Remaining(a) = %d, want %d: only the kept take counts", got, want)
		}
		refund(t, kept) // replayed: Redis gives it back
		if got, want := remaining(t, "a"), 10-1; got != want {
			t.Errorf("Redis Remaining(a) after refunding the kept take = %d, want %d", got, want)
		}
	})
	t.Run("refund after replay", func(t *testing.T) {
		kill(t)
		r := reserve(t, "b")
		restart(t)
		if got, want := remaining(t, "b"), 10-1-1; got != want {
			t.Fatalf("Redis Remaining(b) after the replay = %d, want %d", got, want)
		}
		now.Add(int64(time.Second))
		refund(t, r)
		if got, want := remaining(t, "b"), 10-1; got != want {
			t.Errorf("Redis Remaining(b) after the refund = %d, want %d: the replayed take given back", got, want)
		}
	})
	if st := s.Stats(); st.ReplayFailed != 0 {
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
		s := newStore(t, Config{Primary: primary, Threshold: 1, Cooldown: time.Second, DenyCache: -1})
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
