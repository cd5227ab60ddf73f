package simulate

import (
	"math/rand/v2"
	"testing"
)

// TestCountTable counts a stream of hashes, with collisions in the
// table's low bits and the hash 0, against a map, through growth, adds
// of held keys only, and resets.
func TestCountTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var ct countTable
	want := map[uint64]int32{}
	for round := range 3 {
		for i := range 50_000 {
			h := rng.Uint64N(20_000) << 40 // the low bits collide: probes run long
			if i%1000 == 0 {
				h = 0
			}
			only := i%3 == 0 && round > 0
			_, held := want[max(h, 1)]
			if got := ct.add(h, only); got != (held || !only) {
				t.Fatalf("round %d: add(%x, only %v) = %v, held %v", round, h, only, got, held)
			}
			if held || !only {
				want[max(h, 1)]++
			}
		}
		if ct.n != len(want) || 2*ct.n > len(ct.slots) {
			t.Fatalf("round %d: %d keys in %d slots, want %d keys, at most half full", round, ct.n, len(ct.slots), len(want))
		}
		var sum, wantSum int64
		ct.each(func(n int32) { sum += int64(n) })
		for _, n := range want {
			wantSum += int64(n)
		}
		if sum != wantSum {
			t.Fatalf("round %d: counts sum to %d, want %d", round, sum, wantSum)
		}
		held := heldCounts(&ct)
		for h, n := range want {
			if held[h] != n {
				t.Fatalf("round %d: key %x counted %d, want %d", round, h, held[h], n)
			}
		}
		if round == 1 {
			ct.reset()
			clear(want)
			if ct.n != 0 || ct.slots != nil {
				t.Fatalf("reset left %d keys in %d slots; want a many-slot table let go", ct.n, len(ct.slots))
			}
		}
	}
}

// heldCounts returns the counts ct holds, by hash.
func heldCounts(ct *countTable) map[uint64]int32 {
	m := map[uint64]int32{}
	for _, s := range ct.slots {
		if s.h != 0 {
			m[s.h] = s.n
		}
	}
	return m
}
