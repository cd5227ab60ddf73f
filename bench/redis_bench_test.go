package bench

import (
	"context"
	"crypto/sha1"
	"encoding/csv"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	limiter "github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/store/fallback"
	sredis "github.com/sluicehq/sluice/store/redis"
)

// The Redis comparison: sluice's Redis store against go-redis/redis_rate
// (GCRA in Lua on go-redis) and ulule/limiter's Redis store (a fixed
// window), one hot key (mostly denied) and 100k random keys (all
// admitted), one goroutine (latency) and 64 (throughput), all against one
// redis-server on loopback. The physical limit is redis-benchmark running
// EVALSHA of sluice's own script with the same arguments, from 64
// connections, unpipelined (-P 1) and pipelined (-P 16).

const (
	rdParallel = 64
	rdNumKeys  = 100_000
)

// rdLimit is the per-minute limit of a scenario: the hot key is asked far
// more than 1000 times a minute; each of 100k keys a few times against 100.
func rdLimit(keys string) int {
	if keys == "hot" {
		return 1000
	}
	return 100
}

type rdTaker interface {
	take(ctx context.Context, key string) (bool, error)
	close()
}

type rdImpl struct {
	name string
	new  func(addr string, rate int) (rdTaker, error)
}

var rdImpls = []rdImpl{
	{"sluice-gcra", func(addr string, rate int) (rdTaker, error) {
		return newSluiceRedis(sredis.Config{Addrs: []string{addr}}, nil, sluice.Limit{Rate: rate, Period: time.Minute})
	}},
	{"sluice-gcra-inflight1", func(addr string, rate int) (rdTaker, error) {
		// One call in flight, the tuning for a Redis on the same host:
		// the largest batches.
		return newSluiceRedis(sredis.Config{Addrs: []string{addr}, InFlight: 1}, nil, sluice.Limit{Rate: rate, Period: time.Minute})
	}},
	{"sluice-gcra-inflight4", func(addr string, rate int) (rdTaker, error) {
		return newSluiceRedis(sredis.Config{Addrs: []string{addr}, InFlight: 4}, nil, sluice.Limit{Rate: rate, Period: time.Minute})
	}},
	{"sluice-gcra-unqueued", func(addr string, rate int) (rdTaker, error) {
		// Every Decide sent at once, none queued for a batch: what the
		// store's queue (Config.InFlight) gains or costs.
		return newSluiceRedis(sredis.Config{Addrs: []string{addr}, InFlight: -1}, nil, sluice.Limit{Rate: rate, Period: time.Minute})
	}},
	{"sluice-gcra-goredis", func(addr string, rate int) (rdTaker, error) {
		c := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: rdParallel})
		return newSluiceRedis(sredis.Config{GoRedis: c}, c, sluice.Limit{Rate: rate, Period: time.Minute})
	}},
	{"sluice-gcra-denycache", func(addr string, rate int) (rdTaker, error) {
		t, err := newSluiceRedis(sredis.Config{Addrs: []string{addr}}, nil, sluice.Limit{Rate: rate, Period: time.Minute})
		if err != nil {
			return nil, err
		}
		// store/fallback's deny cache, as sluice serve runs the store:
		// an actor known to be over its limit is answered locally until
		// its RetryAfter.
		if t.dec, err = fallback.New(fallback.Config{Primary: t.store, Policy: sluice.FailLocal}); err == nil {
			err = t.limit(t.dec, []sluice.Limit{{Rate: rate, Period: time.Minute}})
		}
		if err != nil {
			t.close()
			return nil, err
		}
		return t, nil
	}},
	{"sluice-fixed", func(addr string, rate int) (rdTaker, error) {
		return newSluiceRedis(sredis.Config{Addrs: []string{addr}}, nil, sluice.Limit{Rate: rate, Period: time.Minute, Algorithm: sluice.FixedWindow})
	}},
	{"redis_rate", func(addr string, rate int) (rdTaker, error) { return newRedisRate(addr, rate), nil }},
	{"ulule-limiter", func(addr string, rate int) (rdTaker, error) { return newUluleRedis(addr, rate) }},
}

// sluiceRedis is sluice's Redis store deciding one limit, or a policy,
// through sluice.Limiter, the API an application calls: over the store,
// or over dec, a wrapper of it, when that is set.
type sluiceRedis struct {
	store *sredis.Store
	dec   *fallback.Store
	own   *goredis.Client
	lim   *sluice.Limiter
}

func newSluiceRedis(c sredis.Config, own *goredis.Client, limits ...sluice.Limit) (*sluiceRedis, error) {
	s, err := sredis.New(c)
	if err != nil {
		return nil, err
	}
	t := &sluiceRedis{store: s, own: own}
	if err := t.limit(s, limits); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// limit sets the Limiter that decides, over store.
func (s *sluiceRedis) limit(store sluice.Store, limits []sluice.Limit) (err error) {
	s.lim, err = sluice.New(store, sluice.Config{Namespace: "bench-" + strconv.FormatUint(rand.Uint64(), 36), Action: "take", Limits: limits})
	return err
}

func (s *sluiceRedis) take(ctx context.Context, key string) (bool, error) {
	d, err := s.lim.Allow(ctx, key)
	return d.Allowed, err
}

func (s *sluiceRedis) close() {
	if s.dec != nil {
		s.dec.Close()
	}
	s.store.Close()
	if s.own != nil {
		s.own.Close()
	}
}

type redisRate struct {
	c      *goredis.Client
	l      *redis_rate.Limiter
	limit  redis_rate.Limit
	prefix string
}

func newRedisRate(addr string, rate int) *redisRate {
	c := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: rdParallel})
	return &redisRate{c: c, l: redis_rate.NewLimiter(c), limit: redis_rate.PerMinute(rate),
		prefix: "rr:" + strconv.FormatUint(rand.Uint64(), 36) + ":"}
}

func (r *redisRate) take(ctx context.Context, key string) (bool, error) {
	res, err := r.l.Allow(ctx, r.prefix+key, r.limit)
	if err != nil {
		return false, err
	}
	return res.Allowed > 0, nil
}

func (r *redisRate) close() { r.c.Close() }

type ululeRedis struct {
	c *goredis.Client
	l *limiter.Limiter
}

func newUluleRedis(addr string, rate int) (*ululeRedis, error) {
	c := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: rdParallel})
	store, err := ulredis.NewStoreWithOptions(c, limiter.StoreOptions{Prefix: "ul:" + strconv.FormatUint(rand.Uint64(), 36)})
	if err != nil {
		c.Close()
		return nil, err
	}
	return &ululeRedis{c: c, l: limiter.New(store, limiter.Rate{Period: time.Minute, Limit: int64(rate)})}, nil
}

func (u *ululeRedis) take(ctx context.Context, key string) (bool, error) {
	res, err := u.l.Get(ctx, key)
	if err != nil {
		return false, err
	}
	return !res.Reached, nil
}

func (u *ululeRedis) close() { u.c.Close() }

// BenchmarkRedis compares sluice's Redis store with redis_rate and
// ulule/limiter, and with the floor redis-benchmark reaches running
// sluice's script. Each reports admitted/op, evalsha/op (EVALSHA calls on
// the server per decision) and decisions/s.
func BenchmarkRedis(b *testing.B) {
	addr := testserver.StartRedis(b).Addr
	for _, keys := range []string{"hot", "100k"} {
		b.Run("keys="+keys, func(b *testing.B) {
			for _, run := range []string{"serial", "parallel64"} {
				b.Run("run="+run, func(b *testing.B) {
					for _, impl := range rdImpls {
						b.Run("impl="+impl.name, func(b *testing.B) { rdRun(b, addr, impl, keys, run == "parallel64") })
					}
					pipelines := []int{1, 16}
					if run == "serial" {
						pipelines = pipelines[:1]
					}
					for _, p := range pipelines {
						b.Run(fmt.Sprintf("impl=redis-benchmark-P%d", p), func(b *testing.B) {
							rdFloor(b, addr, keys, run == "parallel64", p)
						})
					}
				})
			}
		})
	}
	// A policy of three limits, decided in one script call: only sluice
	// has it, so the figure stands alone.
	b.Run("keys=100k/run=parallel64/policy=3", func(b *testing.B) {
		b.Run("impl=sluice", func(b *testing.B) {
			rdRun(b, addr, rdImpl{"sluice", func(addr string, rate int) (rdTaker, error) {
				return newSluiceRedis(sredis.Config{Addrs: []string{addr}}, nil,
					sluice.Limit{Rate: 10, Period: time.Second},
					sluice.Limit{Rate: rate, Period: time.Minute, Algorithm: sluice.SlidingWindow},
					sluice.Limit{Rate: 1000, Period: time.Hour, Algorithm: sluice.FixedWindow})
			}}, "100k", true)
		})
	})
}

func rdRun(b *testing.B, addr string, impl rdImpl, keys string, parallel bool) {
	t, err := impl.new(addr, rdLimit(keys))
	if err != nil {
		b.Fatal(err)
	}
	defer t.close()
	ctx := context.Background()
	key := pickKey(keys)
	if _, err := t.take(ctx, "warm-up"); err != nil { // loads scripts
		b.Fatal(err)
	}
	rdFlush(b, addr)
	evals0 := testserver.RedisCalls(addr, "evalsha") + testserver.RedisCalls(addr, "eval")
	cpu0 := testserver.RedisCPU(addr)
	b.ReportAllocs()
	b.ResetTimer()
	admitted, elapsed := driveTakes(b, ctx, parallel, rdParallel, t.take, key)
	evals := testserver.RedisCalls(addr, "evalsha") + testserver.RedisCalls(addr, "eval") - evals0
	cpu := testserver.RedisCPU(addr) - cpu0
	b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
	b.ReportMetric(float64(evals)/float64(b.N), "evalsha/op")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "redis-µs/op")
}

// rdFlush empties the server before a measurement, so that Redis's CPU
// per decision is the implementation's own: not the expiry of the keys
// that the implementation measured before it left behind. The scripts
// stay loaded.
func rdFlush(b *testing.B, addr string) {
	if _, err := testserver.RedisDo(addr, "FLUSHALL", "SYNC"); err != nil {
		b.Fatal(err)
	}
}

// rdScript loads sluice's script into the server and returns its SHA-1.
func rdScript(b *testing.B, addr string) string {
	src := sredis.Script()
	sum := sha1.Sum([]byte(src))
	if _, err := testserver.RedisDo(addr, "SCRIPT", "LOAD", src); err != nil {
		b.Fatal(err)
	}
	return hex.EncodeToString(sum[:])
}

// rdFloor runs redis-benchmark with many EVALSHA calls of sluice's script
// deciding a GCRA take of rdLimit(keys) per minute, with the server's
// clock, as the store sends it, and reports redis-benchmark's own rate as
// ns/op and decisions/s: the physical limit of this server and machine.
func rdFloor(b *testing.B, addr, keys string, parallel bool, pipeline int) {
	bin := testserver.Binary(b, "redis-benchmark")
	sha := rdScript(b, addr)
	host, port, _ := strings.Cut(addr, ":")
	// A fixed count, whatever b.N: redis-benchmark reports its own rate,
	// and a short run would mostly measure connecting.
	clients, n := 1, 10_000
	if parallel {
		clients, n = rdParallel, 50_000
	}
	key := "{bench}=floor:" + strconv.FormatUint(rand.Uint64(), 36)
	args := []string{"-h", host, "-p", port, "-c", strconv.Itoa(clients), "-P", strconv.Itoa(pipeline),
		"-n", strconv.Itoa(n), "--csv"}
	if keys != "hot" {
		args = append(args, "-r", strconv.Itoa(rdNumKeys))
		key += ":__rand_int__"
	}
	interval := strconv.FormatInt(int64(time.Minute/time.Microsecond)/int64(rdLimit(keys)), 10)
	args = append(args, "EVALSHA", sha, "1", key, "0", "1", "-1", "0", "1000",
		"0", strconv.Itoa(rdLimit(keys)), interval, "0", "0", "0", "0")
	b.ReportAllocs()
	rdFlush(b, addr)
	cpu0 := testserver.RedisCPU(addr)
	b.ResetTimer()
	out, err := exec.Command(bin, args...).Output()
	b.StopTimer()
	cpu := testserver.RedisCPU(addr) - cpu0
	if err != nil {
		b.Fatalf("redis-benchmark: %v", err)
	}
	rows, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil || len(rows) < 2 || len(rows[1]) < 2 {
		b.Fatalf("redis-benchmark output %q: %v", out, err)
	}
	rps, err := strconv.ParseFloat(rows[1][1], 64)
	if err != nil || rps <= 0 {
		b.Fatalf("redis-benchmark rps %q: %v", rows[1][1], err)
	}
	b.ReportMetric(1e9/rps, "ns/op")
	b.ReportMetric(rps, "decisions/s")
	b.ReportMetric(1, "evalsha/op")
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "redis-µs/op")
}

// TestRedisAdmitted checks that every implementation of the comparison
// admits exactly the limit on a fresh key asked three times the limit at
// once, so that the benchmarks compare limiters doing the same work.
func TestRedisAdmitted(t *testing.T) {
	addr := testserver.StartRedis(t).Addr
	for _, impl := range rdImpls {
		t.Run(impl.name, func(t *testing.T) {
			const rate = 50
			for try := 0; ; try++ {
				minute := time.Now().Truncate(time.Minute) // a fixed window may split the burst once
				tk, err := impl.new(addr, rate)
				if err != nil {
					t.Fatal(err)
				}
				admitted := 0
				for range 3 * rate {
					ok, err := tk.take(context.Background(), "fresh")
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						admitted++
					}
				}
				tk.close()
				if !time.Now().Truncate(time.Minute).Equal(minute) && try == 0 {
					continue
				}
				if admitted != rate {
					t.Errorf("%s admitted %d of %d at once, want %d", impl.name, admitted, 3*rate, rate)
				}
				break
			}
		})
	}
}
