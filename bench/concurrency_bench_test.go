package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"golang.org/x/sync/semaphore"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/cputime"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/store/memory"
	sredis "github.com/sluicehq/sluice/store/redis"
)

// ccLimit is the limit in flight per key of the concurrency benchmarks:
// on the hot key, 64 goroutines acquiring and releasing contend for 8
// places, so part of the traffic is refused.
const ccLimit = 8

// A ccSem acquires a place for key, and returns how to release it; or
// holds one while f runs, each in its own tightest way (the benchmarks'
// op).
type ccSem interface {
	acquire(ctx context.Context, key string) (release func(context.Context) error, ok bool, err error)
	hold(ctx context.Context, key string, f func()) (ok bool, err error)
}

// A ccImpl makes a ccSem, with its count of round trips (nil when the
// server counts them) and how to close it.
type ccImpl struct {
	name string
	new  func(tb testing.TB, addr string) (ccSem, *atomic.Int64, func())
}

// pair is one op: an acquire and, if granted, its release.
func pair(s ccSem) func(ctx context.Context, key string) (bool, error) {
	return func(ctx context.Context, key string) (bool, error) {
		return s.hold(ctx, key, func() {})
	}
}

// holdByAcquire is hold for a ccSem that has no tighter way.
func holdByAcquire(s ccSem, ctx context.Context, key string, f func()) (bool, error) {
	release, ok, err := s.acquire(ctx, key)
	if err != nil || !ok {
		return false, err
	}
	f()
	return true, release(ctx)
}

// semaphores is the usual in-process peer: a golang.org/x/sync
// semaphore.Weighted of ccLimit per key, in a sync.Map, with TryAcquire
// (fail fast, as sluice's Acquire).
type semaphores struct{ m sync.Map }

func (s *semaphores) get(key string) *semaphore.Weighted {
	v, ok := s.m.Load(key)
	if !ok {
		v, _ = s.m.LoadOrStore(key, semaphore.NewWeighted(ccLimit))
	}
	return v.(*semaphore.Weighted)
}

func (s *semaphores) acquire(_ context.Context, key string) (func(context.Context) error, bool, error) {
	sem := s.get(key)
	if !sem.TryAcquire(1) {
		return nil, false, nil
	}
	return func(context.Context) error { sem.Release(1); return nil }, true, nil
}

func (s *semaphores) hold(_ context.Context, key string, f func()) (bool, error) {
	sem := s.get(key)
	if !sem.TryAcquire(1) {
		return false, nil
	}
	f()
	sem.Release(1)
	return true, nil
}

// sluiceSem acquires through a sluice.Concurrency, and holds with Do;
// or, if lease is set, holds with Acquire and Lease.Release.
type sluiceSem struct {
	c     *sluice.Concurrency
	lease bool
}

func (s sluiceSem) acquire(ctx context.Context, key string) (func(context.Context) error, bool, error) {
	l, err := s.c.Acquire(ctx, key, sluice.ClassCritical)
	if err != nil || !l.Allowed {
		return nil, false, err
	}
	return l.Release, true, nil
}

func (s sluiceSem) hold(ctx context.Context, key string, f func()) (bool, error) {
	if s.lease {
		return holdByAcquire(s, ctx, key, f)
	}
	d, err := s.c.Do(ctx, key, sluice.ClassCritical, f)
	return d.Allowed, err
}

func newSluiceSem(tb testing.TB, st sluice.LeaseStore, lease bool) sluiceSem {
	c, err := sluice.NewConcurrency(st, sluice.ConcurrencyConfig{Limit: ccLimit, TTL: time.Minute,
		Namespace: "bench" + strconv.FormatInt(time.Now().UnixNano(), 36)})
	if err != nil {
		tb.Fatal(err)
	}
	return sluiceSem{c, lease}
}

var ccMemoryImpls = []ccImpl{
	{"sluice", func(tb testing.TB, _ string) (ccSem, *atomic.Int64, func()) {
		st := memory.New(memory.Config{})
		return newSluiceSem(tb, st, false), nil, func() { st.Close() }
	}},
	{"sluice-lease", func(tb testing.TB, _ string) (ccSem, *atomic.Int64, func()) {
		st := memory.New(memory.Config{})
		return newSluiceSem(tb, st, true), nil, func() { st.Close() }
	}},
	{"x-sync-semaphore", func(testing.TB, string) (ccSem, *atomic.Int64, func()) {
		return &semaphores{}, nil, func() {}
	}},
	{"floor", newFloorImpl}, // a measuring stick, not a peer: see floorLeases
}

// zsetSemaphore is the usual Redis peer: a counting semaphore on a sorted
// set of holder IDs scored by acquisition time (the pattern of "Redis in
// Action", §6.3, and many libraries after it), on the client's clock:
// acquire is MULTI ZREMRANGEBYSCORE (drop timed-out holders) + ZADD +
// ZCARD, EXEC, and, when the count is beyond the limit, a ZREM of the
// holder just added (a second round trip); release is a ZREM. (The
// book's first version ranks the holder with ZRANK instead of counting;
// under 64 concurrent acquires on loopback it granted 15 places of 8, as
// holders with earlier clock readings joined after others had checked
// their rank.)
type zsetSemaphore struct {
	c      *goredis.Client
	ttl    time.Duration
	prefix string
	n      atomic.Int64
	trips  atomic.Int64
}

func (z *zsetSemaphore) acquire(ctx context.Context, key string) (func(context.Context) error, bool, error) {
	k := z.prefix + key
	id := strconv.FormatInt(z.n.Add(1), 36)
	now := time.Now()
	pipe := z.c.TxPipeline()
	pipe.ZRemRangeByScore(ctx, k, "-inf", strconv.FormatInt(now.Add(-z.ttl).UnixMicro(), 10))
	pipe.ZAdd(ctx, k, goredis.Z{Score: float64(now.UnixMicro()), Member: id})
	card := pipe.ZCard(ctx, k)
	z.trips.Add(1)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, false, err
	}
	release := func(ctx context.Context) error {
		z.trips.Add(1)
		return z.c.ZRem(ctx, k, id).Err()
	}
	if card.Val() > ccLimit {
		return nil, false, release(ctx) // withdraw
	}
	return release, true, nil
}

func (z *zsetSemaphore) hold(ctx context.Context, key string, f func()) (bool, error) {
	return holdByAcquire(z, ctx, key, f)
}

var ccRedisImpls = []ccImpl{
	{"sluice", func(tb testing.TB, addr string) (ccSem, *atomic.Int64, func()) {
		st, err := sredis.New(sredis.Config{Addrs: []string{addr}})
		if err != nil {
			tb.Fatal(err)
		}
		return newSluiceSem(tb, st, false), nil, func() { st.Close() }
	}},
	{"zset-multi", func(_ testing.TB, addr string) (ccSem, *atomic.Int64, func()) {
		z := &zsetSemaphore{c: goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 64}), ttl: time.Minute,
			prefix: "zsem" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"}
		return z, &z.trips, func() { z.c.Close() }
	}},
}

// BenchmarkConcurrency compares sluice's concurrency limit, acquire and
// release per op, with an x/sync semaphore per key in memory and with
// the usual sorted-set semaphore on Redis; the Redis runs report round
// trips per op (sluice's from the server's count of script calls) and
// admitted/op.
func BenchmarkConcurrency(b *testing.B) {
	for _, keys := range []string{"hot", "100k"} {
		for _, run := range []string{"serial", "parallel64"} {
			for _, impl := range ccMemoryImpls {
				b.Run(fmt.Sprintf("store=memory/keys=%s/run=%s/impl=%s", keys, run, impl.name), func(b *testing.B) {
					ccRun(b, "", impl, keys, run == "parallel64")
				})
			}
		}
	}
	addr := testserver.StartRedis(b).Addr
	for _, keys := range []string{"hot", "100k"} {
		for _, run := range []string{"serial", "parallel64"} {
			for _, impl := range ccRedisImpls {
				b.Run(fmt.Sprintf("store=redis/keys=%s/run=%s/impl=%s", keys, run, impl.name), func(b *testing.B) {
					ccRun(b, addr, impl, keys, run == "parallel64")
				})
			}
		}
	}
}

func ccRun(b *testing.B, addr string, impl ccImpl, keys string, parallel bool) {
	sem, trips, closeImpl := impl.new(b, addr)
	defer closeImpl()
	ctx := context.Background()
	op := pair(sem)
	if _, err := op(ctx, "warm-up"); err != nil { // loads scripts, dials
		b.Fatal(err)
	}
	var evals0 int64
	if addr != "" {
		evals0 = testserver.RedisCalls(addr, "evalsha") + testserver.RedisCalls(addr, "eval")
	}
	if trips != nil {
		trips.Store(0)
	}
	key := pickKey(keys) // builds the key list on first use: not timed
	cpu0 := cputime.Self()
	var redis0 time.Duration
	if addr != "" {
		redis0 = testserver.RedisCPU(addr)
	}
	b.ReportAllocs()
	b.ResetTimer()
	admitted, _ := driveTakes(b, ctx, parallel, rdParallel, op, key)
	b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
	// CPU time per op, of this process and of Redis: on a shared machine
	// it drifts far less than wall time with the other load.
	b.ReportMetric(float64(cputime.Self()-cpu0)/float64(b.N), "cpu-ns/op")
	if addr != "" {
		b.ReportMetric(float64(testserver.RedisCPU(addr)-redis0)/float64(b.N), "redis-cpu-ns/op")
	}
	switch {
	case trips != nil:
		b.ReportMetric(float64(trips.Load())/float64(b.N), "round-trips/op")
	case addr != "":
		evals := testserver.RedisCalls(addr, "evalsha") + testserver.RedisCalls(addr, "eval") - evals0
		b.ReportMetric(float64(evals)/float64(b.N), "round-trips/op")
	}
}

// TestConcurrencyAdmitted checks that every implementation limits: 64
// goroutines acquiring one key at once, holding what they get, are
// granted exactly ccLimit places; released, the places are free again.
func TestConcurrencyAdmitted(t *testing.T) {
	addr := testserver.StartRedis(t).Addr
	for _, impl := range append(append([]ccImpl{}, ccMemoryImpls...), ccRedisImpls...) {
		t.Run(impl.name, func(t *testing.T) {
			sem, _, closeImpl := impl.new(t, addr)
			defer closeImpl()
			var mu sync.Mutex
			var releases []func(context.Context) error
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					release, ok, err := sem.acquire(t.Context(), "k")
					if err != nil {
						t.Error(err)
					}
					if ok {
						mu.Lock()
						releases = append(releases, release)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if len(releases) != ccLimit {
				t.Errorf("%s granted %d of 64, want %d", impl.name, len(releases), ccLimit)
			}
			for _, r := range releases {
				if err := r(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if ok, err := pair(sem)(t.Context(), "k"); err != nil || !ok {
				t.Errorf("after the releases: %v, %v; want granted", ok, err)
			}
		})
	}
}
