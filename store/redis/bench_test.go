package redis

import (
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// BenchmarkDecideBatch decides batches of 3 and 16 takes, from 16
// goroutines, each for one of 500 actors picked at random, on the test's
// own redis-server with its clock: the old way, one pipelined EVALSHA of
// the script per request ("pipelined"), against one EVALSHA deciding the
// whole batch ("script"). It reports decisions/s, Redis's
// CPU time per decision (used_cpu_sys+used_cpu_user of INFO cpu, over the
// run) and the share of takes admitted, for one GCRA limit, for a
// policy of two, and for an approximate sliding window of an hour whose
// actors are denied almost always (each denial searches the instant a
// take will fit). (Requests under other algorithms get a call each
// either way: a batch saved them nothing measurable.)
func BenchmarkDecideBatch(b *testing.B) {
	srv := sharedServer(b)
	policies := []struct {
		name   string
		limits []sluice.Limit
	}{
		{"gcra", []sluice.Limit{{Rate: 20, Period: time.Second}}},
		{"gcra2", []sluice.Limit{{Rate: 20, Period: time.Second}, {Rate: 600, Period: time.Minute}}},
		{"approx", []sluice.Limit{{Rate: 20, Period: time.Hour, Algorithm: sluice.ApproxSlidingWindow}}},
	}
	const actors = 500
	for _, p := range policies {
		for _, size := range []int{3, 16} {
			for _, mode := range []struct {
				name    string
				perCall int
			}{{"pipelined", 1}, {"script", maxPerCall}} {
				b.Run(p.name+"/"+strconv.Itoa(size)+"/"+mode.name, func(b *testing.B) {
					s := newStore(b, Config{})
					s.perCall = mode.perCall
					prefix := uniquePrefix(b)
					var admitted, decided atomic.Int64
					cpu0 := redisCPU(b, srv)
					b.ReportAllocs()
					b.SetParallelism(8)
					b.ResetTimer()
					start := time.Now()
					b.RunParallel(func(pb *testing.PB) {
						rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
						rs := make([]sluice.Request, size)
						var n, ok int64
						for pb.Next() {
							for i := range rs {
								rs[i] = sluice.Request{Prefix: prefix, Key: strconv.Itoa(rng.IntN(actors)), Limits: p.limits, Cost: 1}
							}
							ds, errs := s.DecideBatch(b.Context(), rs)
							for i := range ds {
								if errs[i] != nil {
									b.Fatalf("DecideBatch[%d]: %v", i, errs[i])
								}
								if ds[i].Allowed {
									ok++
								}
							}
							n += int64(size)
						}
						admitted.Add(ok)
						decided.Add(n)
					})
					elapsed := time.Since(start)
					b.StopTimer()
					cpu := redisCPU(b, srv) - cpu0
					n := float64(decided.Load())
					b.ReportMetric(n/elapsed.Seconds(), "decisions/s")
					b.ReportMetric(cpu.Seconds()*1e6/n, "redis-µs/decision")
					b.ReportMetric(float64(admitted.Load())/n, "admitted/decision")
				})
			}
		}
	}
}

// redisCPU returns the CPU time the Redis server has used, system and
// user, from INFO cpu.
func redisCPU(b *testing.B, srv *testserver.Redis) time.Duration {
	b.Helper()
	cpu := testserver.RedisCPU(srv.Addr)
	if cpu < 0 {
		b.Fatal("INFO cpu: no answer")
	}
	return cpu
}
