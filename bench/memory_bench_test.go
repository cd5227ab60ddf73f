package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/cputime"
)

// memScenario is one traffic pattern against the in-memory limiters.
type memScenario struct {
	keys     string // "hot": one key; "1M": 1,000,000 uniformly random keys
	parallel bool   // b.RunParallel on every core, or one goroutine
	traffic  string // "admit": nothing should be denied; "deny": nearly all denied
}

// limit returns the limit of the scenario, chosen so that the expected
// admitted fraction is known whatever the machine's speed:
//
//   - hot/admit: 10^6 per 10 ms (10^8/s), far above what two cores can ask,
//     so every request is admitted; it also shows which peers refill
//     correctly at high rates.
//   - hot/deny: 1000/s against millions of requests per second: all but
//     a few in 10^4 are denied.
//   - 1M/admit: 100/s per key, while each key sees a few requests per
//     second: all admitted.
//   - 1M/deny: 1 per hour per key, and every key already used its one
//     request when the timer starts: all denied.
func (s memScenario) limit() memLimit {
	switch {
	case s.keys == "hot" && s.traffic == "admit":
		return memLimit{Rate: 1_000_000, Period: 10 * time.Millisecond, Burst: 1_000_000}
	case s.keys == "hot":
		return memLimit{Rate: 1000, Period: time.Second, Burst: 1000}
	case s.traffic == "admit":
		return memLimit{Rate: 100, Period: time.Second, Burst: 100}
	default:
		return memLimit{Rate: 1, Period: time.Hour, Burst: 1}
	}
}

func (s memScenario) run() string {
	if s.parallel {
		return "parallel"
	}
	return "serial"
}

func (s memScenario) numKeys() int {
	if s.keys == "hot" {
		return 1
	}
	return memNumKeys
}

// The scenario dimensions, in the order benchmarks run.
var (
	memKeySpreads = []string{"hot", "1M"}
	memTraffics   = []string{"admit", "deny"}
)

const (
	memNumKeys = 1_000_000
	// memSeqLen is the length of the pre-generated random key sequence:
	// long enough that the walk does not repeat within a run's cache
	// lifetime, a power of two so wrapping is a mask.
	memSeqLen = 1 << 22
	memHotKey = "203.0.113.7"
)

// memKeyData holds the pre-generated keys and the random order they are
// asked in, so no formatting or random number generation runs in the
// timed loop.
var memKeyData = sync.OnceValues(func() ([]string, []uint32) {
	keys := make([]string, memNumKeys)
	for i := range keys {
		// Addresses from 10.0.0.0/8, as a limiter keyed by client IP sees.
		keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)
	}
	rng := rand.New(rand.NewPCG(2026, 1))
	seq := make([]uint32, memSeqLen)
	for i := range seq {
		seq[i] = uint32(rng.IntN(memNumKeys))
	}
	return keys, seq
})

// memFixture keeps the limiter of the running benchmark across the runs
// the testing package makes of it with growing b.N, and across its serial
// and parallel runs, so that 1M keys are inserted once per implementation
// and scenario, and the state stays warm.
var memFixture struct {
	name   string
	taker  memTaker
	perKey float64 // heap bytes per key after the 1M keys were inserted
}

func memReleaseFixture() {
	if memFixture.taker != nil {
		memFixture.taker.close()
	}
	memFixture.name, memFixture.taker, memFixture.perKey = "", nil, 0
	runtime.GC()
}

// memPrepare returns the limiter for the running benchmark, new on its
// first run. For the 1M scenarios, every key is then used once, each
// passed as a fresh copy, as a request parser would hand it over, so that
// a limiter that keeps the key pays for its bytes; the growth of the live
// heap divided by the keys is the limiter's cost per key.
func memPrepare(b *testing.B, impl memImpl, sc memScenario) (memTaker, float64) {
	b.Helper()
	name := impl.name + " " + sc.keys + " " + sc.limit().String()
	if memFixture.name == name {
		return memFixture.taker, memFixture.perKey
	}
	memReleaseFixture()
	if sc.keys != "hot" {
		// The shared key list is built once, on first use: before the
		// heap is measured, or the first limiter is charged for it.
		memKeyData()
	}
	before := memHeap()
	var fresh []string
	if sc.keys != "hot" {
		keys, _ := memKeyData()
		fresh = make([]string, len(keys))
		for i, k := range keys {
			fresh[i] = strings.Clone(k)
		}
	}
	t, err := impl.new(sc.limit(), nil)
	if err != nil {
		b.Fatalf("%s.new(%v) = %v", impl.name, sc.limit(), err)
	}
	ctx := context.Background()
	for _, k := range fresh {
		if _, err := t.take(ctx, k); err != nil {
			b.Fatalf("%s: take(%q) = %v", impl.name, k, err)
		}
	}
	var perKey float64
	if n := len(fresh); n > 0 {
		// The copies the limiter did not keep are garbage now.
		fresh = nil
		perKey = float64(memHeap()-before) / float64(n)
	}
	memFixture.name, memFixture.taker, memFixture.perKey = name, t, perKey
	return t, perKey
}

// BenchmarkMemory compares the in-memory limiters on one hot key and on
// 1M random keys, serial and parallel, with traffic that is all admitted
// or all but denied. Each reports admitted/op; a peer whose admitted/op
// differs from sluice's in the same scenario is not doing the same work
// (see TestAdmitted and docs/benchmarks.md). The serial 1M runs also
// report B/key, the live heap each limiter keeps per key.
func BenchmarkMemory(b *testing.B) {
	defer memReleaseFixture()
	for _, keys := range memKeySpreads {
		b.Run("keys="+keys, func(b *testing.B) {
			for _, traffic := range memTraffics {
				b.Run("traffic="+traffic, func(b *testing.B) {
					for _, impl := range memImpls {
						var runs []memScenario
						for _, parallel := range []bool{false, true} {
							sc := memScenario{keys: keys, parallel: parallel, traffic: traffic}
							if memExcluded(impl, sc) == "" {
								runs = append(runs, sc)
							}
						}
						if len(runs) == 0 {
							continue // a sub-benchmark without runs would time itself
						}
						b.Run("impl="+impl.name, func(b *testing.B) {
							for _, sc := range runs {
								b.Run("run="+sc.run(), func(b *testing.B) { memRun(b, impl, sc) })
							}
						})
					}
				})
			}
		})
	}
}

// memExcluded reports why impl does not run sc, or "".
func memExcluded(impl memImpl, sc memScenario) string {
	if impl.fits != nil {
		if why := impl.fits(sc.limit(), sc.numKeys()); why != "" {
			return why
		}
	}
	// Parallel runs measure the store's locking, which sluice's
	// algorithms share: GCRA stands for them, asked by Allow and by Admit.
	if sc.parallel && strings.HasPrefix(impl.name, "sluice-") && !strings.HasPrefix(impl.name, "sluice-gcra") {
		return "parallel runs only sluice-gcra"
	}
	return ""
}

func memRun(b *testing.B, impl memImpl, sc memScenario) {
	t, perKey := memPrepare(b, impl, sc)
	hot := sc.keys == "hot"
	var keys []string
	var seq []uint32
	if !hot {
		keys, seq = memKeyData()
	}
	ctx := context.Background()
	var admitted, failed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	// CPU per decision of the whole process: on a shared machine,
	// steadier than ns/op, which counts the time other tenants held the
	// cores (see docs/benchmarks.md).
	cpu := cputime.Self()
	if sc.parallel {
		var start atomic.Uint32
		b.RunParallel(func(pb *testing.PB) {
			// Each goroutine walks the sequence from its own point.
			i := start.Add(memSeqLen/8 + 12345)
			var ok, bad int64
			for pb.Next() {
				key := memHotKey
				if !hot {
					key = keys[seq[i&(memSeqLen-1)]]
					i++
				}
				allowed, err := t.take(ctx, key)
				if allowed {
					ok++
				}
				if err != nil {
					bad++
				}
			}
			admitted.Add(ok)
			failed.Add(bad)
		})
	} else {
		var ok, bad int64
		for i := range b.N {
			key := memHotKey
			if !hot {
				key = keys[seq[i&(memSeqLen-1)]]
			}
			allowed, err := t.take(ctx, key)
			if allowed {
				ok++
			}
			if err != nil {
				bad++
			}
		}
		admitted.Add(ok)
		failed.Add(bad)
	}
	b.StopTimer()
	b.ReportMetric(float64(cputime.Self()-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(admitted.Load())/float64(b.N), "admitted/op")
	if perKey != 0 && !sc.parallel {
		b.ReportMetric(perKey, "B/key")
	}
	if n := failed.Load(); n > 0 {
		b.ReportMetric(float64(n)/float64(b.N), "errors/op")
	}
}

// memHeap returns the live heap after full collections: repeated until
// it stops shrinking, so that memory a finished benchmark released
// through a finalizer or a goroutine's exit is gone too.
func memHeap() int64 {
	var ms runtime.MemStats
	last := int64(math.MaxInt64)
	for range 10 {
		runtime.GC()
		runtime.Gosched()
		runtime.ReadMemStats(&ms)
		cur := int64(ms.HeapAlloc)
		if last-cur < 1<<20 {
			return cur
		}
		last = cur
	}
	return int64(ms.HeapAlloc)
}

// BenchmarkClock measures the clocks the limiters read, to subtract from
// their costs: time.Now is tens of nanoseconds on these VMs.
func BenchmarkClock(b *testing.B) {
	b.Run("time.Now", func(b *testing.B) {
		b.ReportAllocs()
		var sink int64
		for range b.N {
			sink += time.Now().UnixNano()
		}
		memSink.Store(sink)
	})
	b.Run("time.Since", func(b *testing.B) {
		b.ReportAllocs()
		start := time.Now()
		var sink time.Duration
		for range b.N {
			sink += time.Since(start)
		}
		memSink.Store(int64(sink))
	})
}

// memSink keeps the compiler from removing measured work.
var memSink atomic.Int64
