package simulate

import (
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"
)

// TestCountTable counts a stream of hashes in three columns, with
// collisions in the table's low bits and the hash 0, against a map,
// through growth, lookups of held keys only, and resets.
func TestCountTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	ct := newCountTable(3)
	type counts [3]int32
	want := map[uint64]counts{}
	for round := range 3 {
		for i := range 50_000 {
			h := rng.Uint64N(20_000) << 40 // the low bits collide: probes run long
			if i%1000 == 0 {
				h = 0
			}
			add := i%3 != 0 || round == 0
			_, held := want[max(h, 1)]
			s, isNew := ct.slot(h, add)
			if (s != nil) != (held || add) || isNew != (!held && add) {
				t.Fatalf("round %d: slot(%x, add %v) = %v, new %v; held %v", round, h, add, s != nil, isNew, held)
			}
			if s == nil {
				continue
			}
			col := int(h>>40) % 3
			setCount(s, col, count(s, col)+1)
			c := want[max(h, 1)]
			c[col]++
			want[max(h, 1)] = c
		}
		if ct.n != len(want) || 2*ct.n > ct.slots() {
			t.Fatalf("round %d: %d keys in %d slots, want %d keys, at most half full", round, ct.n, ct.slots(), len(want))
		}
		held := map[uint64]counts{}
		for s := range ct.each(ct.words) {
			held[s[0]] = counts{count(s, 0), count(s, 1), count(s, 2)}
		}
		for h, c := range want {
			if held[h] != c {
				t.Fatalf("round %d: key %x counted %v, want %v", round, h, held[h], c)
			}
		}
		if round == 1 {
			ct.reset()
			clear(want)
			if ct.n != 0 || ct.words != nil {
				t.Fatalf("reset left %d keys in %d slots; want a many-slot table let go", ct.n, ct.slots())
			}
		}
	}
}

// TestRateCounts counts a day of requests of a few hundred keys in the
// windows of three periods, one of which (7 s) straddles the ends of the
// longest (an hour), and requires each distribution to be the one
// counted directly, by (key, window), with the budget back at the end.
func TestRateCounts(t *testing.T) {
	periods := []time.Duration{7 * time.Second, time.Minute, time.Hour}
	left := 1 << 20
	var rc rateCounts
	for _, p := range periods {
		rc.hist(int64(p))
	}
	rc.counts, rc.left = newCountTable(len(periods)), &left
	type pair struct {
		key, window int64
	}
	direct := make([]map[pair]int32, len(periods))
	for i := range direct {
		direct[i] = map[pair]int32{}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC).UnixNano()
	for ts := t0; ts < t0+int64(24*time.Hour); ts += int64(time.Duration(rng.IntN(900)) * time.Millisecond) {
		key := int64(rng.IntN(300))
		if rng.IntN(4) == 0 {
			key = int64(rng.IntN(5)) // heavy hitters, many requests a window
		}
		rc.add(ts, uint64(key)+1)
		for i, p := range periods {
			direct[i][pair{key, ts / int64(p)}]++
		}
	}
	rc.flush()
	for i, h := range rc.hists {
		var want [40]int64
		for _, n := range direct[i] {
			want[bits.Len32(uint32(n))-1]++
		}
		if h.Buckets != want || h.Untallied != 0 {
			t.Errorf("%v: buckets %v (%d untallied), want %v", periods[i], h.Buckets, h.Untallied, want)
		}
	}
	if left != 1<<20 || rc.counts.n != 0 {
		t.Errorf("after flush: %d words left, %d keys held; want the whole budget back", left, rc.counts.n)
	}
}
