package bench

import (
	"context"
	"runtime"
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
