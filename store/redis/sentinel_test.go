package redis

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// failoverTimeout bounds how long after a failover starts the Store must
// decide on the new master.
const failoverTimeout = 20 * time.Second

// TestSentinel starts a master, its replica and a Sentinel, decides
// through a Store on a Sentinel client of each library, fails the master
// over, by SENTINEL FAILOVER or by killing it, under load, and checks
// that the Store decides on the new master within failoverTimeout, that
// the state written before the failover (replicated: WAIT) still counts,
// that every failed decision is an error wrapping sluice.ErrStore, and
// that no goroutine outlives the client.
func TestSentinel(t *testing.T) {
	testserver.SkipShort(t, "starts a master, a replica and a Sentinel, and fails over")
	for _, tc := range []struct {
		name   string
		client func(t *testing.T, rs *testserver.RedisSentinel) (Config, func())
		kill   bool // kill the master instead of SENTINEL FAILOVER
	}{
		{"rueidis/failover", rueidisSentinel, false},
		{"rueidis/kill", rueidisSentinel, true},
		{"go-redis/failover", goRedisSentinel, false},
		{"go-redis/kill", goRedisSentinel, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := testserver.StartRedisSentinel(t)
			goroutines := runtime.NumGoroutine()
			c, closeClient := tc.client(t, rs)
			s := newStore(t, c)
			prefix := uniquePrefix(t)
			policy := []sluice.Limit{
				{Rate: 5, Period: time.Hour},
				{Rate: 8, Period: time.Hour, Algorithm: sluice.SlidingWindow, Buckets: 6},
			}
			var step atomic.Int64 // the request clock: one millisecond a request
			take := func(key string) (sluice.Decision, error) {
				now := t0.Add(time.Duration(step.Add(1)) * time.Millisecond)
				return s.Decide(context.Background(), sluice.Request{Prefix: prefix, Key: key, Limits: policy, Cost: 1, Now: now})
			}

			for i := range 3 {
				d, err := take("a")
				if err != nil || !d.Allowed || d.Remaining != 5-1-i {
					t.Fatalf("take %d before the failover = %+v, %v; want allowed, Remaining %d", i, d, err, 5-1-i)
				}
			}
			// Whatever a client wrote before this write, the replica has
			// once WAIT says so: the replication stream is ordered.
			replies, err := testserver.RedisDoAll(rs.Master.Addr,
				[]string{"SET", prefix + "replicated", "1"}, []string{"WAIT", "1", "4000"})
			if err != nil || replies[1] != "1" {
				t.Fatalf("SET, WAIT 1 on the master = %q, %v; want 1 replica", replies, err)
			}

			stopLoad := make(chan struct{})
			var load sync.WaitGroup
			var loadOK, loadErr atomic.Int64
			for g := range 2 {
				load.Go(func() {
					for i := range 20_000 { // bounded; stopLoad ends it sooner
						select {
						case <-stopLoad:
							return
						default:
						}
						_, err := take("load" + strconv.Itoa(g*10+i%10))
						switch {
						case err == nil:
							loadOK.Add(1)
						case errors.Is(err, sluice.ErrStore):
							loadErr.Add(1)
						default:
							t.Errorf("take during the failover = %v, want a decision or sluice.ErrStore", err)
							return
						}
						time.Sleep(time.Millisecond) // pace the load on 2 shared cores
					}
				})
			}

			start := time.Now()
			if tc.kill {
				rs.Master.Stop()
			} else if err := rs.Failover(); err != nil {
				t.Fatalf("SENTINEL FAILOVER = %v", err)
			}
			for i := 0; ; i++ {
				// A take on a fresh key after the replica was promoted,
				// found there: written on it, not replicated from the old
				// master, nor written on an old master that takes writes
				// until the Sentinel demotes it.
				info, _ := rs.Replica.Info("replication")
				promoted := info["role"] == "master"
				key := "probe" + strconv.Itoa(i)
				_, err := take(key)
				if err == nil && promoted {
					if n, _ := testserver.RedisDo(rs.Replica.Addr, "EXISTS", Key(prefix, key, policy[0])); n == "1" {
						break
					}
				}
				if time.Since(start) > failoverTimeout {
					addr, _ := rs.MasterAddr()
					t.Fatalf("no decision on the new master %s %v after the failover (Sentinel names %s): last error %v",
						rs.Replica.Addr, failoverTimeout, addr, err)
				}
				time.Sleep(20 * time.Millisecond) // polling the failover, bounded by failoverTimeout
			}
			switched := time.Since(start)
			if addr, err := rs.MasterAddr(); err != nil || addr != rs.Replica.Addr {
				t.Errorf("Sentinel's master = %s, %v; want the promoted replica %s", addr, err, rs.Replica.Addr)
			}

			// The three takes of before count: two more, then denied.
			for i, want := range []bool{true, true, false} {
				d, err := take("a")
				if err != nil || d.Allowed != want || d.Remaining != max(1-i, 0) {
					t.Errorf("take %d after the failover = %+v, %v; want Allowed %v, Remaining %d", i, d, err, want, max(1-i, 0))
				}
			}
			close(stopLoad)
			load.Wait()
			t.Logf("deciding on the new master %v after the failover began; load: %d decisions, %d errors",
				switched.Round(time.Millisecond), loadOK.Load(), loadErr.Load())

			s.Close()
			closeClient()
			deadline := time.Now().Add(5 * time.Second)
			for runtime.NumGoroutine() > goroutines {
				if time.Now().After(deadline) {
					t.Fatalf("goroutines: %d before the client, %d 5s after it was closed", goroutines, runtime.NumGoroutine())
				}
				time.Sleep(10 * time.Millisecond) // the client's goroutines end asynchronously
			}
		})
	}
}

// rueidisSentinel returns a Config on a rueidis client that finds the
// master through the Sentinel, and the client's Close.
func rueidisSentinel(t *testing.T, rs *testserver.RedisSentinel) (Config, func()) {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{rs.Sentinel.Addr},
		Sentinel:     rueidis.SentinelOption{MasterSet: rs.MasterName},
		DisableCache: true,
	})
	if err != nil {
		t.Fatalf("rueidis.NewClient(sentinel) = %v", err)
	}
	var once sync.Once
	closeClient := func() { once.Do(rc.Close) }
	t.Cleanup(closeClient)
	return Config{Client: rc}, closeClient
}

// goRedisSentinel is rueidisSentinel on go-redis's failover client.
func goRedisSentinel(t *testing.T, rs *testserver.RedisSentinel) (Config, func()) {
	t.Helper()
	gc := goredis.NewFailoverClient(&goredis.FailoverOptions{
		MasterName:    rs.MasterName,
		SentinelAddrs: []string{rs.Sentinel.Addr},
	})
	var once sync.Once
	closeClient := func() { once.Do(func() { gc.Close() }) }
	t.Cleanup(closeClient)
	return Config{GoRedis: gc}, closeClient
}
