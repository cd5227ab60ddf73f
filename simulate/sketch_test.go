package simulate

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"
	"time"
)

// TestTopKeys checks the Space-Saving guarantees on a Zipf stream against
// exact counts: every key above total/capacity is held, and no count is
// under its key's true count or over it by more than its err.
func TestTopKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	z := rand.NewZipf(rng, 1.2, 1, 1e6)
	const n, capacity = 200_000, 256
	tk := newTopKeys(capacity, 1, maphash.MakeSeed())
	exact := map[string]int64{}
	deniedFrom := map[string]int64{} // requests from a key's first denial on
	for range n {
		k := fmt.Sprint(z.Uint64())
		denied := exact[k] >= 100 // a limit of 100 per key
		exact[k]++
		if denied || deniedFrom[k] > 0 {
			deniedFrom[k]++
		}
		tk.add(k).tell(0, denied)
	}
	held := map[string]counter{}
	for _, s := range tk.heap {
		c := s.c
		held[c.key] = *c
	}
	for k, want := range exact {
		c, ok := held[k]
		switch {
		case want > n/capacity && !ok:
			t.Errorf("key %s counted %d > n/cap = %d is not held", k, want, n/capacity)
		case ok && (c.count < want || c.count-c.err > want):
			t.Errorf("key %s: count %d err %d, true count %d", k, c.count, c.err, want)
		}
	}
	var trueShare int64
	for _, d := range deniedFrom {
		trueShare += d + 100 // its first 100 were allowed
	}
	// A lower bound: keys just over the limit, with few requests, may
	// hold no counter; with 256 counters the heavy ones give 80% or more.
	got := tk.deniedShare(0)
	if got > trueShare || got < trueShare*8/10 {
		t.Errorf("deniedShare = %d, true %d: want a lower bound within 20%%", got, trueShare)
	}
	if top := tk.top(3, func(c *counter) int64 { return c.count }); len(top) != 3 || top[0].key != "0" {
		t.Errorf("top(3) = %+v, want key 0 first", top)
	}
}

// TestTopKeysColumns feeds one stream to a sketch of three columns, as
// a route's three rules tell it their decisions, and to a sketch of one
// column for each rule alone: each column must read as its rule's own
// sketch, before and after merging another worker's.
func TestTopKeysColumns(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	z := rand.NewZipf(rng, 1.2, 1, 1e5)
	seed := maphash.MakeSeed()
	const capacity = 128
	limits := []int64{10, 100, 1000} // each rule denies a key past its limit
	shared := []*topKeys{newTopKeys(capacity, len(limits), seed), newTopKeys(capacity, len(limits), seed)}
	alone := [][]*topKeys{{}, {}}
	for w := range alone {
		for range limits {
			alone[w] = append(alone[w], newTopKeys(capacity, 1, seed))
		}
	}
	exact := map[string]int64{}
	for range 50_000 {
		k := fmt.Sprint(z.Uint64())
		exact[k]++
		w := maphash.String(seed, k) % 2 // the worker the key's client goes to
		c := shared[w].addHashed(maphash.String(seed, k), k)
		for col, l := range limits {
			denied := exact[k] > l
			c.tell(col, denied)
			alone[w][col].add(k).tell(0, denied)
		}
	}
	check := func(when string, w int) {
		for col := range limits {
			one := alone[w][col]
			if got, want := shared[w].deniedShare(col), one.deniedShare(0); got != want {
				t.Errorf("%s: column %d: deniedShare %d, its rule's own sketch %d", when, col, got, want)
			}
			for _, s := range one.heap {
				c := s.c
				if sc := shared[w].idx[c.hash]; sc == nil || sc.count != c.count || sc.err != c.err || sc.den[col] != c.den[0] {
					t.Fatalf("%s: column %d: key %s: %+v, its rule's own sketch %+v", when, col, c.key, sc, c)
				}
			}
		}
	}
	check("one worker", 0)
	shared[0].merge(shared[1])
	for col := range limits {
		alone[0][col].merge(alone[1][col])
	}
	check("merged", 0)
	if shared[0].deniedShare(0) == 0 || shared[0].deniedShare(2) == 0 {
		t.Error("the stream denies no key: the columns are not exercised")
	}
}

func TestDistinct(t *testing.T) {
	for _, n := range []int{0, 10, 1000, 100_000} {
		d := newDistinct(maphash.MakeSeed())
		for i := range n {
			d.add(fmt.Sprint("key", i))
			d.add(fmt.Sprint("key", i/2)) // repeats change nothing
		}
		got := d.count()
		if diff := got - int64(n); diff*diff > int64(n*n)/400+4 { // within 5%, or ±2
			t.Errorf("distinct of %d keys = %d", n, got)
		}
	}
}

// TestSeries checks that a series widens to whole, aligned buckets and
// loses no request.
func TestSeries(t *testing.T) {
	var s series
	t0 := int64(1_767_571_200) * 1e9 // 2026-01-05 00:00 UTC
	var total int64
	for i := range int64(100_000) {
		at := t0 + 7*1e9 + i*(int64(time.Second)*3) // 3 s apart, for 3.5 days
		s.add(at, i%10 == 0)
		total++
	}
	var req, deny int64
	for i := range seriesLen {
		req += s.req[i]
		deny += s.deny[i]
	}
	if req != total || deny != total/10 {
		t.Errorf("series holds %d requests, %d denied; want %d, %d", req, deny, total, total/10)
	}
	if time.Duration(s.width) != 30*time.Minute || s.start%s.width != 0 {
		t.Errorf("width %v, start %d: want 30m buckets (240 of them span 5 days), aligned", time.Duration(s.width), s.start)
	}
}

// TestTopKeysMerge splits a Zipf stream by key over three sketches, as
// a replay's workers split clients, and checks the merged sketch as
// TestTopKeys checks one: the guarantees hold for the whole stream, and
// the heap and its index are whole.
func TestTopKeysMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	z := rand.NewZipf(rng, 1.2, 1, 1e6)
	const n, capacity = 200_000, 256
	seed := maphash.MakeSeed() // the workers' sketches share it
	parts := []*topKeys{newTopKeys(capacity, 1, seed), newTopKeys(capacity, 1, seed), newTopKeys(capacity, 1, seed)}
	exact := map[string]int64{}
	for range n {
		k := fmt.Sprint(z.Uint64())
		exact[k]++
		parts[maphash.String(seed, k)%3].add(k).tell(0, exact[k] > 100)
	}
	tk := parts[0]
	tk.merge(parts[1])
	tk.merge(parts[2])
	if tk.total != n || len(tk.heap) != capacity || len(tk.idx) != capacity {
		t.Fatalf("merged: total %d, %d counters, %d indexed; want %d, %d, %d", tk.total, len(tk.heap), len(tk.idx), n, capacity, capacity)
	}
	for i, s := range tk.heap {
		c := s.c
		if c.pos != i || s.count != c.count || tk.idx[c.hash] != c || (i > 0 && tk.heap[(i-1)/2].count > c.count) {
			t.Fatalf("counter %d (%s, count %d) at pos %d: heap or index broken", i, c.key, c.count, c.pos)
		}
	}
	for k, want := range exact {
		c, ok := tk.idx[maphash.String(seed, k)]
		switch {
		case want > n/capacity && !ok:
			t.Errorf("key %s counted %d > n/cap = %d is not held", k, want, n/capacity)
		case ok && (c.count < want || c.count-c.err > want):
			t.Errorf("key %s: count %d err %d, true count %d", k, c.count, c.err, want)
		case ok && c.den[0].everDenied != (want > 100) && c.err == 0:
			t.Errorf("key %s: ever denied %v, true count %d over a limit of 100", k, c.den[0].everDenied, want)
		}
	}
	tk.add("new").tell(0, false) // still a working sketch
	if c := tk.idx[maphash.String(seed, "new")]; c == nil || tk.heap[c.pos].c != c || tk.heap[c.pos].count != c.count {
		t.Error("a key added after the merge is not held at its position")
	}
}

// TestSeriesMerge merges series of different spans and widths, and
// wants the series of all their requests.
func TestSeriesMerge(t *testing.T) {
	t0 := int64(1_767_571_200) * 1e9
	at := func(i int64) int64 { return t0 + i*int64(time.Second)*7 }
	tests := []struct {
		name  string
		parts [3][2]int64 // the requests [from, to) of each part
	}{
		{"same span", [3][2]int64{{0, 9000}, {0, 9000}, {0, 9000}}},
		{"later and wider", [3][2]int64{{5000, 9000}, {0, 100}, {0, 60_000}}},
		{"one empty", [3][2]int64{{0, 0}, {10, 20}, {30, 40_000}}},
	}
	for _, tt := range tests {
		var whole series // in time order, as one worker would see them
		var parts [3]series
		for i := range int64(60_000) {
			for p, r := range tt.parts {
				if i >= r[0] && i < r[1] {
					whole.add(at(i), i%3 == 0)
					parts[p].add(at(i), i%3 == 0)
				}
			}
		}
		got := parts[0]
		got.merge(&parts[1])
		got.merge(&parts[2])
		if got != whole {
			t.Errorf("%s: merged series (start %d, width %v) differs from the whole's (start %d, width %v)",
				tt.name, got.start, time.Duration(got.width), whole.start, time.Duration(whole.width))
		}
	}
}

// BenchmarkTopKeys counts a stream of Zipf clients, as a route's traffic
// sketch of 4096 counters does on every line of a replay: most keys are
// rare, so that a lookup misses and a counter is replaced.
func BenchmarkTopKeys(b *testing.B) {
	const n = 1 << 20
	seed := maphash.MakeSeed()
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, 1<<20)
	keys, hashes := make([]string, n), make([]uint64, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.%d.%d.%d", z.Uint64()>>16, z.Uint64()>>8&255, z.Uint64()&255)
		hashes[i] = maphash.String(seed, keys[i])
	}
	tk := newTopKeys(4096, 3, seed)
	b.ResetTimer()
	for i := range b.N {
		tk.addHashed(hashes[i&(n-1)], keys[i&(n-1)]).tell(i%3, i%5 == 0)
	}
}
