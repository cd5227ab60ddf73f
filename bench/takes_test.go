package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// driveTakes makes b.N takes of the keys key returns: from about
// goroutines goroutines in all when parallel, serially otherwise. It fails
// the benchmark if any take errs, stops the timer, and returns how many
// takes were admitted and how long the loop took.
func driveTakes(b *testing.B, ctx context.Context, parallel bool, goroutines int,
	take func(context.Context, string) (bool, error), key func() string) (admitted int64, elapsed time.Duration) {
	var ok, failed atomic.Int64
	one := func() {
		allowed, err := take(ctx, key())
		if err != nil {
			failed.Add(1)
		} else if allowed {
			ok.Add(1)
		}
	}
	start := time.Now()
	if parallel {
		b.SetParallelism((goroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				one()
			}
		})
	} else {
		for range b.N {
			one()
		}
	}
	elapsed = time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d decisions failed", n, b.N)
	}
	return ok.Load(), elapsed
}

// storeKeys are the mcNumKeys keys of the Redis and memcached benchmarks
// and the random order in which they are asked.
var storeKeys = sync.OnceValues(func() ([]string, []uint32) {
	keys := make([]string, mcNumKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)
	}
	rng := rand.New(rand.NewPCG(2026, 4))
	seq := make([]uint32, 1<<20)
	for i := range seq {
		seq[i] = uint32(rng.IntN(mcNumKeys))
	}
	return keys, seq
})

// pickKey returns the key of each take: one hot key when keys is "hot",
// otherwise the next of storeKeys in their random order.
func pickKey(keys string) func() string {
	if keys == "hot" {
		return func() string { return "203.0.113.7" }
	}
	names, seq := storeKeys()
	var next atomic.Uint64
	return func() string { return names[seq[next.Add(1)&(1<<20-1)]] }
}
