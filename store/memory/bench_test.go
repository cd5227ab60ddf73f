package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/cputime"
)

// Benchmarks: one hot key or 1,000,000 uniformly random keys, serial or
// parallel, admit-heavy (the limit is twice the offered rate) or
// deny-heavy (a tenth of it), with Request.Now set on a fake time grid
// (1 µs of request time per decision, see benchDecide) unless the name
// says "clock", where the store reads time.Now.

const (
	manyKeys  = 1_000_000
	benchPref = "sluice:login:"
)

// benchKeys are 1M distinct keys shaped like IPv4 addresses, and a random
// sequence of indexes into them: nothing is formatted in timed loops.
var benchKeys = sync.OnceValues(func() ([]string, []uint32) {
	keys := make([]string, manyKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&0xff, i&0xff)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	order := make([]uint32, 1<<20)
	for i := range order {
		order[i] = uint32(rng.IntN(manyKeys))
	}
	return keys, order
})

// benchAlgorithms gives, per algorithm, the limit for an offered rate of
// perSecond requests per key per second, times factor.
var benchAlgorithms = []struct {
	name  string
	limit func(perSecond, factor float64) []sluice.Limit
}{
	{"gcra", func(r, f float64) []sluice.Limit { return []sluice.Limit{limitFor(r*f, sluice.GCRA)} }},
	{"fixed", func(r, f float64) []sluice.Limit { return []sluice.Limit{limitFor(r*f, sluice.FixedWindow)} }},
	{"sliding", func(r, f float64) []sluice.Limit { return []sluice.Limit{limitFor(r*f, sluice.SlidingWindow)} }},
	{"approx", func(r, f float64) []sluice.Limit { return []sluice.Limit{limitFor(r*f, sluice.ApproxSlidingWindow)} }},
	{"log", func(r, f float64) []sluice.Limit { return []sluice.Limit{limitFor(r*f, sluice.SlidingLog)} }},
	{"policy", func(r, f float64) []sluice.Limit {
		return []sluice.Limit{limitFor(r*f, sluice.GCRA), limitFor(r*f*1.5, sluice.SlidingWindow)}
	}},
}

// limitFor returns a limit of the algorithm allowing perSecond events per
// second, with the shortest period that makes its Rate whole (so that a
// slow limit has a small burst and denies from the start) and a Rate of
// at most 2000.
func limitFor(perSecond float64, alg sluice.Algorithm) sluice.Limit {
	period := time.Second
	rate := perSecond
	for rate < 1 {
		period *= 10
		rate *= 10
	}
	for rate > 2000 {
		period /= 10
		rate /= 10
	}
	return sluice.Limit{Rate: int(rate), Period: period, Algorithm: alg}
}

func BenchmarkDecide(b *testing.B) {
	for _, keys := range []string{"hot", "1M"} {
		for _, alg := range benchAlgorithms {
			for _, load := range []struct {
				name   string
				factor float64
			}{{"admit", 2}, {"deny", 0.1}} {
				name := fmt.Sprintf("keys=%s/alg=%s/load=%s", keys, alg.name, load.name)
				// Offered rate per key: 1M/s on the hot key, 1/s on each of 1M keys.
				perKey := 1e6
				if keys == "1M" {
					perKey = 1
				}
				limits := alg.limit(perKey, load.factor)
				hot := keys == "hot"
				b.Run(name+"/serial", func(b *testing.B) { benchDecide(b, limits, benchWay{hot: hot}) })
				b.Run(name+"/parallel", func(b *testing.B) { benchDecide(b, limits, benchWay{hot: hot, parallel: true}) })
				if alg.name == "gcra" {
					b.Run(name+"/serial/clock", func(b *testing.B) { benchDecide(b, limits, benchWay{hot: hot, clock: true}) })
					b.Run(name+"/parallel/clock", func(b *testing.B) { benchDecide(b, limits, benchWay{hot: hot, parallel: true, clock: true}) })
				}
				if alg.name != "log" {
					b.Run(name+"/serial/bound", func(b *testing.B) { benchDecide(b, limits, benchWay{hot: hot, bound: true}) })
				}
			}
		}
	}
}

// A benchWay is how benchDecide asks: of one hot key or of a million,
// on every core or one goroutine, at the store's clock or the request's
// time, through Decide or a Bound of the limits (a Limiter's way).
type benchWay struct {
	hot, parallel, clock, bound bool
}

func benchDecide(b *testing.B, limits []sluice.Limit, way benchWay) {
	hot, parallel, clock := way.hot, way.parallel, way.clock
	keys, order := benchKeys()
	s := New(Config{SweepInterval: -1, MaxBytes: -1})
	defer s.Close()
	decide := func(ctx context.Context, r sluice.Request) (sluice.Decision, error) { return s.Decide(ctx, r) }
	if way.bound {
		bd, err := s.Bind(s, benchPref, limits)
		if err != nil {
			b.Fatal(err)
		}
		decide = func(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
			return bd.Decide(ctx, r.Key, r.Op, r.Cost, r.Now)
		}
	}
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if clock {
		base = time.Now()
	}
	if !hot {
		// Every key exists, last admitted at a random time in the last
		// 1.1 periods, as in a steady state: the timed loop measures
		// decisions, not inserts, and a deny-heavy load denies from the
		// start.
		rng := rand.New(rand.NewPCG(5, 6))
		spread := int64(limits[0].Period) * 11 / 10
		for _, k := range keys {
			r := sluice.Request{Prefix: benchPref, Key: k, Limits: limits, Cost: 1, Now: base.Add(-time.Duration(rng.Int64N(spread)))}
			if _, err := s.Decide(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Request time: every decision advances a shared fake clock by 1 µs,
	// so the offered rate is 1M decisions per second of request time
	// however many goroutines share it. Goroutines claim 64 µs at a time,
	// keeping the atomic off the hot path; their times differ by at most
	// that much.
	const batch = 64
	var clk atomic.Int64
	clk.Store(base.UnixNano())
	var admitted atomic.Int64
	var worker atomic.Uint32
	run := func(next func() bool) {
		id := worker.Add(1)
		r := sluice.Request{Prefix: benchPref, Key: keys[0], Limits: limits, Cost: 1}
		var now int64
		// Each goroutine starts at its own scattered place in the key
		// sequence, so that goroutines do not follow each other key by key.
		n, i := int64(0), int(uint32(id)*0x9e3779b1>>12)
		for next() {
			if !hot {
				r.Key = keys[order[i&(len(order)-1)]]
			}
			if !clock {
				if i%batch == 0 {
					now = clk.Add(batch*int64(time.Microsecond)) - batch*int64(time.Microsecond)
				}
				now += int64(time.Microsecond)
				r.Now = time.Unix(0, now)
			}
			i++
			d, err := decide(ctx, r)
			if err != nil {
				b.Fatal(err)
			}
			if d.Allowed {
				n++
			}
		}
		admitted.Add(n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Self()
	if parallel {
		b.RunParallel(func(pb *testing.PB) { run(pb.Next) })
	} else {
		run(b.Loop)
	}
	// CPU per decision, of every goroutine of the process: on a shared
	// machine, steadier than ns/op, which counts time others held the
	// cores.
	b.ReportMetric(float64(cputime.Self()-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(admitted.Load())/float64(b.N), "admitted/op")
}

// BenchmarkBytesPerKey measures the heap a million actors take, after GC,
// per key: in all (B/key, which includes the store's copy of the key)
// and beyond the key's bytes (B/key-overhead).
func BenchmarkBytesPerKey(b *testing.B) {
	for _, alg := range benchAlgorithms[:3] {
		b.Run("alg="+alg.name, func(b *testing.B) {
			keys, _ := benchKeys()
			limits := alg.limit(1, 1)
			var keyBytes int64
			for _, k := range keys {
				keyBytes += int64(len(k))
			}
			b.ReportAllocs()
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				s := New(Config{SweepInterval: -1, MaxBytes: -1})
				now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
				for _, k := range keys {
					if _, err := s.Decide(context.Background(), sluice.Request{Prefix: benchPref, Key: k, Limits: limits, Cost: 1, Now: now}); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				if s.Len() != manyKeys {
					b.Fatalf("Len() = %d, want %d", s.Len(), manyKeys)
				}
				heap := float64(after.HeapAlloc) - float64(before.HeapAlloc)
				b.ReportMetric(heap/manyKeys, "B/key")
				b.ReportMetric((heap-float64(keyBytes)-manyKeys*float64(len(benchPref)))/manyKeys, "B/key-overhead")
				b.ReportMetric(float64(s.Bytes())/manyKeys, "counted-B/key")
				runtime.KeepAlive(s)
				s.Close()
			}
		})
	}
}

// BenchmarkFlood measures a key flood: every decision is on a key the
// store has never seen, in a store at its cap, so each inserts a state
// and evicts one. With 64 shards a shard's table stays small; with one,
// it holds about 300,000 states, past the size at which its index keeps
// its keys' homes, so that a removal hashes the keys it moves again.
func BenchmarkFlood(b *testing.B) {
	for _, shards := range []int{64, 1} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			s := New(Config{Shards: shards, SweepInterval: -1, MaxBytes: 16 << 20})
			defer s.Close()
			ctx := context.Background()
			r := sluice.Request{Prefix: benchPref, Limits: []sluice.Limit{{Rate: 1, Period: time.Hour}}, Cost: 1, Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			var buf []byte
			n := 0
			decide := func() {
				buf = strconv.AppendInt(append(buf[:0], "10."...), int64(n), 10)
				n++
				r.Key = unsafe.String(unsafe.SliceData(buf), len(buf)) // the store copies what it keeps
				if _, err := s.Decide(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
			for s.Bytes() < s.maxBytes*3/4 { // fill the store to its cap
				decide()
			}
			full := s.Len()
			for range full {
				decide()
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cputime.Self()
			for b.Loop() {
				decide()
			}
			b.ReportMetric(float64(cputime.Self()-cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(s.Len()), "states")
		})
	}
}

// BenchmarkHash measures the shard hash of a name by where its cut and its
// separators fall: a Limiter's name (prefix ending in sep, key without
// it) is hashed in two parts without a copy; an IPv6 key's name copies
// the part before the key's last sep; "joined" is that copy and hash of
// the whole name, which every name cost before (see Store.hash).
func BenchmarkHash(b *testing.B) {
	s := New(Config{SweepInterval: -1})
	defer s.Close()
	for _, c := range []struct{ name, prefix, key string }{
		{"ipv4", benchPref, "203.0.113.7"},
		{"ipv6", benchPref, "2001:db8:85a3::8a2e:370:7334"},
		{"prefix-without-sep", "sluice-login-", "203.0.113.7"},
	} {
		b.Run("name="+c.name, func(b *testing.B) {
			var h uint64
			for b.Loop() {
				h += s.hash(c.prefix, c.key)
			}
			sinkHash = h
		})
		b.Run("name="+c.name+"/joined", func(b *testing.B) {
			var h uint64
			for b.Loop() {
				h += s.joined(c.prefix, c.key)
			}
			sinkHash = h
		})
	}
}

var sinkHash uint64

// BenchmarkShardSharing measures what two cores pay for deciding through
// the same shards: one goroutine on a million GCRA keys (one), two on
// all of them (shared), and two each on the keys of its own half of the
// shards (apart). CPU per decision is the figure to compare: shared
// costs more than one, apart less, as each shard's lock stays in one
// core's cache.
func BenchmarkShardSharing(b *testing.B) {
	keys, _ := benchKeys()
	limits := []sluice.Limit{{Rate: 2, Period: time.Second}}
	for _, mode := range []string{"one", "shared", "apart"} {
		b.Run("goroutines="+mode, func(b *testing.B) {
			s := New(Config{SweepInterval: -1, MaxBytes: -1})
			defer s.Close()
			ctx := context.Background()
			base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var halves [2][]string // the keys of each half of the shards
			for _, k := range keys {
				if _, err := s.Decide(ctx, sluice.Request{Prefix: benchPref, Key: k, Limits: limits, Cost: 1, Now: base}); err != nil {
					b.Fatal(err)
				}
				half := 2 * int(s.hash(benchPref, k)&s.mask) / len(s.shards)
				halves[half] = append(halves[half], k)
			}
			run := func(ks []string, n int, seed uint64) {
				rng := rand.New(rand.NewPCG(seed, 9))
				r := sluice.Request{Prefix: benchPref, Limits: limits, Cost: 1}
				for i := range n {
					r.Key, r.Now = ks[rng.IntN(len(ks))], base.Add(time.Duration(i)*time.Microsecond)
					if _, err := s.Decide(ctx, r); err != nil {
						panic(err)
					}
				}
			}
			b.ResetTimer()
			cpu := cputime.Self()
			if mode == "one" {
				run(keys, b.N, 1)
			} else {
				var wg sync.WaitGroup
				for g := range 2 {
					ks := keys
					if mode == "apart" {
						ks = halves[g]
					}
					wg.Go(func() { run(ks, b.N/2, uint64(g+3)) })
				}
				wg.Wait()
			}
			b.ReportMetric(float64(cputime.Self()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
