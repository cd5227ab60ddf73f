package fallback

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/store/redis"
)

// outage is a Store in front of a real redis-server that a test kills and
// restarts, with every request on a clock the test moves.
type outage struct {
	srv      *testserver.Redis
	primary  *redis.Store
	s        *Store
	now      atomic.Int64 // Unix nanoseconds
	cooldown time.Duration
	ns       string // the namespace of the test's limiters
}

// newOutage starts redis-server and a Store on it whose breaker opens at
// the first failure, with the clock at t0.
func newOutage(t *testing.T) *outage {
	t.Helper()
	o := &outage{srv: testserver.StartRedis(t), cooldown: time.Second, ns: fmt.Sprintf("t%d", time.Now().UnixNano())}
	// One connection: once a probe got through after the restart, every
	// later call does too (with several, each stale one fails once).
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{o.srv.Addr}, DisableCache: true, PipelineMultiplex: -1})
	if err != nil {
		t.Fatalf("rueidis.NewClient = %v", err)
	}
	t.Cleanup(rc.Close)
	if o.primary, err = redis.New(redis.Config{Client: rc}); err != nil {
		t.Fatalf("redis.New = %v", err)
	}
	o.now.Store(t0.UnixNano())
	o.s = newStore(t, Config{Primary: o.primary, Policy: sluice.FailLocal, Threshold: 1, Cooldown: o.cooldown, Timeout: 2 * time.Second, Clock: o.clock, DenyCache: -1,
		OnError: func(err error) { t.Logf("primary failed (Redis killed): %v", err) }})
	return o
}

func (o *outage) clock() time.Time { return time.Unix(0, o.now.Load()) }

func (o *outage) advance(d time.Duration) { o.now.Add(int64(d)) }

// limiters returns a Limiter of action on the Store and one on Redis
// alone, to read what Redis holds.
func (o *outage) limiters(t *testing.T, action string, limits ...sluice.Limit) (lim, inRedis *sluice.Limiter) {
	t.Helper()
	cfg := sluice.Config{Limits: limits, Namespace: o.ns, Action: action, Clock: o.clock}
	lim, err := sluice.New(o.s, cfg)
	if err != nil {
		t.Fatalf("sluice.New = %v", err)
	}
	if inRedis, err = sluice.New(o.primary, cfg); err != nil {
		t.Fatalf("sluice.New = %v", err)
	}
	return lim, inRedis
}

// kill snapshots Redis and kills it, then makes a request that opens the
// breaker.
func (o *outage) kill(t *testing.T) {
	t.Helper()
	if _, err := o.srv.Do("SAVE"); err != nil { // so that the restart keeps the state
		t.Fatalf("SAVE = %v", err)
	}
	o.srv.Stop()
	lim, _ := o.limiters(t, "kill", sluice.Limit{Rate: 1000, Period: time.Hour})
	if _, err := lim.Allow(context.Background(), "someone"); err != nil || !o.s.Open() {
		t.Fatalf("take with Redis killed = %v, breaker open %v; want allowed locally, open", err, o.s.Open())
	}
}

// restart restarts Redis from its snapshot and probes it until the
// breaker closes, then waits for the replay.
func (o *outage) restart(t *testing.T) {
	t.Helper()
	if err := o.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	lim, _ := o.limiters(t, "probe", sluice.Limit{Rate: 1000, Period: time.Hour})
	for deadline := time.Now().Add(10 * time.Second); o.s.Open(); {
		if time.Now().After(deadline) {
			t.Fatal("breaker still open 10s after Redis restarted")
		}
		o.advance(o.cooldown) // the next request probes
		if _, err := lim.Peek(context.Background(), "prober"); err != nil {
			t.Fatalf("Peek = %v", err)
		}
	}
	o.s.replayWG.Wait()
}

// remaining is what a take of actor would leave in Redis.
func remaining(t *testing.T, inRedis *sluice.Limiter, actor string) int {
	t.Helper()
	d, err := inRedis.Peek(context.Background(), actor)
	if err != nil {
		t.Fatalf("Peek(%q) on Redis = %v", actor, err)
	}
	return d.Remaining
}

// TestOutageJournaled kills a real redis-server (restarted from its
// snapshot, so it keeps what it counted before) and checks that resets
// and refunds made while it was down reach it with the replay.
func TestOutageJournaled(t *testing.T) {
	o := newOutage(t)
	ctx := context.Background()
	allow := func(t *testing.T, lim *sluice.Limiter, actor string, n int) {
		t.Helper()
		for i := range n {
			if d, err := lim.Allow(ctx, actor); err != nil || !d.Allowed {
				t.Fatalf("Allow(%q) #%d = %+v, %v; want allowed", actor, i, d, err)
			}
		}
	}
	reserve := func(t *testing.T, lim *sluice.Limiter, actor string) *sluice.Reservation {
		t.Helper()
		r, err := lim.Reserve(ctx, actor, 1)
		if err != nil || !r.Allowed {
			t.Fatalf("Reserve(%q) = %+v, %v; want allowed", actor, r, err)
		}
		return r
	}
	// delta returns the Stats counted since before.
	delta := func(before Stats) Stats {
		st := o.s.Stats()
		return Stats{Replayed: st.Replayed - before.Replayed, ReplayedResets: st.ReplayedResets - before.ReplayedResets,
			ReplayedRefunds: st.ReplayedRefunds - before.ReplayedRefunds, ReplayFailed: st.ReplayFailed - before.ReplayFailed}
	}

	t.Run("reset", func(t *testing.T) {
		lim, inRedis := o.limiters(t, "login", sluice.Limit{Rate: 10, Period: time.Hour})
		allow(t, lim, "r", 3) // Redis counts them
		before := o.s.Stats()
		o.kill(t)
		allow(t, lim, "r", 2) // local, then forgotten by the reset
		if err := lim.Reset(ctx, "r"); err != nil {
			t.Fatalf("Reset = %v", err)
		}
		allow(t, lim, "r", 1) // local, counts
		o.restart(t)
		if got, want := remaining(t, inRedis, "r"), 10-1-1; got != want {
			t.Errorf("Redis Remaining(r) = %d, want %d: the reset forgets the 3 takes before the outage and the 2 before it", got, want)
		}
		if got, want := delta(before), (Stats{Replayed: 2, ReplayedResets: 1}); got != want {
			t.Errorf("Stats counted = %+v, want %+v (someone's take and the take after the reset)", got, want)
		}
	})
	t.Run("refund of a take Redis counted", func(t *testing.T) {
		lim, inRedis := o.limiters(t, "login", sluice.Limit{Rate: 10, Period: time.Hour})
		res := reserve(t, lim, "f") // Redis counts it
		before := o.s.Stats()
		o.kill(t)
		o.advance(time.Second)
		if err := res.Refund(ctx); err != nil {
			t.Fatalf("Refund = %v", err)
		}
		o.restart(t)
		if got, want := remaining(t, inRedis, "f"), 10-1; got != want {
			t.Errorf("Redis Remaining(f) = %d, want %d: the take given back", got, want)
		}
		if got, want := delta(before), (Stats{Replayed: 1, ReplayedRefunds: 1}); got != want {
			t.Errorf("Stats counted = %+v, want %+v", got, want)
		}
	})
	t.Run("refund after its window", func(t *testing.T) {
		// A fixed window gives back only a take of the current window:
		// the refund must reach Redis with its take's time, not its own.
		lim, inRedis := o.limiters(t, "post", sluice.Limit{Rate: 10, Period: time.Minute, Algorithm: sluice.FixedWindow})
		window := o.clock().Truncate(time.Minute).Add(time.Minute)
		o.now.Store(window.Add(10 * time.Second).UnixNano())
		res := reserve(t, lim, "w") // Redis counts it, in this window
		before := o.s.Stats()
		o.kill(t)
		o.now.Store(window.Add(time.Minute + 10*time.Second).UnixNano())
		allow(t, lim, "w", 1) // local, in the next window
		if err := res.Refund(ctx); err != nil {
			t.Fatalf("Refund = %v", err)
		}
		o.restart(t)
		if now := o.clock(); now.Sub(window) >= 2*time.Minute {
			t.Fatalf("the restart took the clock to %v, past the window; want before %v", now, window.Add(2*time.Minute))
		}
		if got, want := remaining(t, inRedis, "w"), 10-1-1; got != want {
			t.Errorf("Redis Remaining(w) = %d, want %d: the take of this window counts, the refund of the last one's gives nothing back", got, want)
		}
		if got, want := delta(before), (Stats{Replayed: 2, ReplayedRefunds: 1}); got != want {
			t.Errorf("Stats counted = %+v, want %+v", got, want)
		}
	})
}
