package memory

import (
	"hash/maphash"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestTableCollisions drives a table with hashes chosen to collide: keys
// that share a hash keep states of their own through inserts, removals
// and compaction.
func TestTableCollisions(t *testing.T) {
	// Keys a0..a3 share hash 7; b has hash 8.
	hashes := map[string]uint64{"a0": 7, "a1": 7, "a2": 7, "a3": 7, "b": 8}
	tb := newTable(sluice.Limit{Rate: 1, Period: time.Second, Algorithm: sluice.FixedWindow}, func(p, k string) uint64 { return hashes[p+k] })
	put := map[string]uint64{"a0": 7, "a1": 7, "a2": 7, "b": 8}
	for k, h := range put {
		tb.insert("", k, h, []int64{int64(len(k)), int64(k[len(k)-1])}, math.MaxInt64)
	}
	check := func(want map[string]uint64) {
		t.Helper()
		if tb.len() != len(want) {
			t.Errorf("len() = %d, want %d", tb.len(), len(want))
		}
		for k, h := range want {
			s, ok, _ := tb.get(k, 0, h, tb.limit)
			if w := []int64{int64(len(k)), int64(k[len(k)-1])}; !ok || !slices.Equal(s, w) {
				t.Errorf("get(%q, %d) = %v, %v; want %v, true", k, h, s, ok, w)
			}
		}
	}
	check(put)
	if _, ok, _ := tb.get("a3", 0, 7, tb.limit); ok {
		t.Errorf("get(a3, 7) found a state for a key never inserted")
	}
	s, _, _ := tb.get("a0", 0, 7, tb.limit)
	tb.remove("", "a0", 7, s)
	delete(put, "a0")
	check(put)
	s, _, _ = tb.get("a2", 0, 7, tb.limit)
	tb.remove("", "a2", 7, s)
	delete(put, "a2")
	check(put)
	tb.insert("", "a0", 7, []int64{2, '0'}, math.MaxInt64)
	put["a0"] = 7
	check(put)
	// each visits every state once; overflow keys are rehashed with the
	// seed, so compare keys only.
	var seen []string
	tb.each(0, func(p, k string, _ []int64) bool { seen = append(seen, p+k); return true })
	slices.Sort(seen)
	if want := []string{"a0", "a1", "b"}; !slices.Equal(seen, want) {
		t.Errorf("each visited %v, want %v", seen, want)
	}
}

// TestTableCollisionsPrefix drives tables of one-word and of larger
// states (which keep their keys in their slots alike) whose keys all
// share one hash: keys of one numbered prefix with rests of one length,
// one with a rest of 255 bytes (kept apart), and a whole name of that
// prefix kept unnumbered. Each is found under its own name only, by the
// prefix's number or not; removing the long key and another keeps the
// rest found and gives back what they counted.
func TestTableCollisionsPrefix(t *testing.T) {
	for _, l := range []sluice.Limit{
		{Rate: 1, Period: time.Second},
		{Rate: 1, Period: time.Second, Algorithm: sluice.FixedWindow},
		{Rate: 1, Period: time.Second, Algorithm: sluice.SlidingWindow},
	} {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			tb := newTable(l, func(p, k string) uint64 { return 7 })
			want := map[string]int64{"ns:a:k0": 1, "ns:a:k1": 2, "ns:a:k2": 3, "ns:a:k4": 5}
			state := func(v int64) []int64 {
				s := make([]int64, tb.words)
				s[0] = v
				return s
			}
			for _, rest := range []string{"k0", "k1", "k2"} {
				tb.insert("ns:a:", rest, 7, state(want["ns:a:"+rest]), math.MaxInt64)
			}
			tb.insert("", "ns:a:k4", 7, state(5), math.MaxInt64)
			// A rest of 255 bytes, the length that marks a key kept apart.
			long := "ns:a:" + strings.Repeat("l", longKey)
			want[long] = 6
			before := tb.bytes
			tb.insert("ns:a:", long[5:], 7, state(6), math.MaxInt64)
			if got := tb.bytes - before; got < allocSize(longKey)+longEntry {
				t.Errorf("the long key added %d bytes, want its %d kept apart and more", got, allocSize(longKey)+longEntry)
			}
			check := func(stage string) {
				t.Helper()
				for range 2 { // the second time, by the number the first found
					for _, name := range []string{"ns:a:k0", "ns:a:k1", "ns:a:k2", "ns:a:k3", "ns:a:k4", long} {
						for _, cut := range []int{0, 5} {
							s, ok := tb.lookup(name[:cut], name[cut:], 7)
							v, held := want[name]
							if ok != held || ok && (s[0] != v || len(s) != tb.words) {
								t.Fatalf("%s: lookup(%q, %q) found %v (%v), want %v (%d)", stage, name[:cut], name[cut:], ok, s, held, v)
							}
						}
					}
				}
			}
			check("inserted")
			for _, name := range []string{long, "ns:a:k1"} {
				s, _ := tb.lookup("ns:a:", name[5:], 7)
				before, apart := tb.bytes, int64(0)
				if name == long {
					apart = allocSize(longKey) + longEntry
				}
				if got := tb.remove("ns:a:", name[5:], 7, s); got != apart || tb.bytes != before-apart {
					t.Errorf("removing %.10q gave back %d bytes (counting %d), want %d", name, got, tb.bytes, apart)
				}
				delete(want, name)
			}
			check("removed")
			if len(tb.long) != 0 {
				t.Errorf("%d keys kept apart after the long one went", len(tb.long))
			}
		})
	}
}

// TestHashSplit checks that the shard hash of Prefix+Key does not depend
// on the cut, for short and long names with and without sep, and last
// parts either side of splitMin.
func TestHashSplit(t *testing.T) {
	s := New(Config{SweepInterval: -1})
	defer s.Close()
	names := []string{"", ":", "ab", "a:b", "ns:act:203.0.113.7", "ns:act:2001:db8::1", "::", "a:bcde", "a:bcdef", "abcdef",
		"ns:act:2001:db8::/64", "ns:act:2001:db8::abcde",
		strings.Repeat("x", 64), strings.Repeat("x:", 40), strings.Repeat("xy", 100) + ":" + strings.Repeat("z", 70)}
	seen := map[uint64]string{}
	for _, name := range names {
		want := s.hash("", name)
		if other, dup := seen[want]; dup {
			t.Errorf("hash(%q) = hash(%q)", name, other)
		}
		seen[want] = name
		for cut := range len(name) + 1 {
			if got := s.hash(name[:cut], name[cut:]); got != want {
				t.Fatalf("hash(%q, %q) = %x, want %x", name[:cut], name[cut:], got, want)
			}
		}
	}
}

// TestIndexRandom checks the open-addressing index against a map on a
// random sequence of inserts and removals, with many colliding hashes.
func TestIndexRandom(t *testing.T) {
	want := map[string]uint64{}
	tb := newTable(sluice.Limit{Rate: 1, Period: time.Second}, func(p, k string) uint64 { return want[p+k] })
	rng := rand.New(rand.NewPCG(3, 4))
	for step := range 20000 {
		k := strconv.Itoa(rng.IntN(3000))
		h := uint64(rng.IntN(500)) << 40 // few distinct hashes: long probe runs
		if old, ok := want[k]; ok {
			h = old
		}
		_, in := want[k]
		if s, ok, _ := tb.get(k, 0, h, tb.limit); ok != in {
			t.Fatalf("step %d: get(%q) found = %v, want %v", step, k, ok, in)
		} else if ok {
			tb.remove("", k, h, s)
			if _, ok, _ := tb.get(k, 0, h, tb.limit); ok {
				t.Fatalf("step %d: remove(%q) left it", step, k)
			}
			delete(want, k)
		} else {
			tb.insert("", k, h, []int64{int64(len(k))}, math.MaxInt64)
			want[k] = h
		}
		if tb.len() != len(want) {
			t.Fatalf("step %d: len() = %d, want %d", step, tb.len(), len(want))
		}
	}
	for k, h := range want {
		if s, ok, _ := tb.get(k, 0, h, tb.limit); !ok || s[0] != int64(len(k)) {
			t.Errorf("get(%q) = %v, %v; want [%d], true", k, s, ok, len(k))
		}
	}
	n := 0
	tb.each(12345, func(string, string, []int64) bool { n++; return true })
	if n != len(want) {
		t.Errorf("each visited %d states, want %d", n, len(want))
	}
}

// TestTableKeyLengths keeps GCRA states whose keys are held in the slot
// (up to inlineKey bytes) and apart (longer), around that length and with
// any bytes, through removals that free slots for reuse and a compaction
// that moves them.
func TestTableKeyLengths(t *testing.T) {
	seed := maphash.MakeSeed()
	tb := newTable(sluice.Limit{Rate: 1, Period: time.Second}, seeded(seed))
	want := map[string]int64{}
	for i := range 3000 {
		n := []int{0, 1, inlineKey - 1, inlineKey, inlineKey + 1, 200}[i%6]
		k := strings.Repeat("\x00{é", 100)[:n] + strconv.Itoa(i)
		want[k] = int64(i + 1)
		tb.insert("", k, maphash.String(seed, k), []int64{int64(i + 1)}, math.MaxInt64)
	}
	check := func(stage string) {
		t.Helper()
		if tb.len() != len(want) {
			t.Errorf("%s: len() = %d, want %d", stage, tb.len(), len(want))
		}
		for k, v := range want {
			if s, ok, _ := tb.get(k, 0, maphash.String(seed, k), tb.limit); !ok || s[0] != v {
				t.Fatalf("%s: get(%q) = %v, %v; want [%d], true", stage, k, s, ok, v)
			}
		}
		seen := eachMatches(t, tb, stage, want)
		if seen != len(want) {
			t.Errorf("%s: each visited %d states, want %d", stage, seen, len(want))
		}
	}
	check("inserted")
	i := 0
	for k := range want { // drop nine in ten: slots freed, then reused
		if i++; i%10 != 0 {
			s, _, _ := tb.get(k, 0, maphash.String(seed, k), tb.limit)
			tb.remove("", k, maphash.String(seed, k), s)
			delete(want, k)
		}
	}
	check("removed")
	for j := range 50 {
		k := strings.Repeat("r", j*3) + "!"
		want[k] = int64(-j - 1)
		tb.insert("", k, maphash.String(seed, k), []int64{int64(-j - 1)}, math.MaxInt64)
	}
	check("reused")
	tb.compact(4)
	if tb.slots() != len(want) {
		t.Errorf("compact left %d slots for %d states", tb.slots(), len(want))
	}
	check("compacted")
	long := 0
	for k := range want {
		if len(k) > inlineKey {
			long++
		}
	}
	if len(tb.long) != long {
		t.Errorf("%d keys kept apart, want %d: removals must forget theirs", len(tb.long), long)
	}
}

// TestAllocSize checks allocSize against Go's size classes: never less
// than what the runtime allocates for an object of that size.
func TestAllocSize(t *testing.T) {
	for n := int64(1); n <= 40<<10; n++ {
		if got, class := allocSize(n), int64(cap(append([]byte(nil), make([]byte, n)...))); got < class {
			t.Fatalf("allocSize(%d) = %d, want at least %d", n, got, class)
		}
	}
	if got := allocSize(0); got != 0 {
		t.Errorf("allocSize(0) = %d, want 0", got)
	}
}

// TestTableChunks fills tables of one-word and of larger states past
// several chunks, through removals, reuse and a compaction: every state
// stays found, every chunk but the last is full, and what the table
// counts is what its chunks, index and keys take.
func TestTableChunks(t *testing.T) {
	for _, l := range []sluice.Limit{
		{Rate: 1, Period: time.Second},
		{Rate: 1, Period: time.Second, Algorithm: sluice.FixedWindow},
		{Rate: 1, Period: time.Second, Algorithm: sluice.SlidingWindow, Buckets: 60},
	} {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			seed := maphash.MakeSeed()
			tb := newTable(l, seeded(seed))
			n := 3*tb.fullSlots() + tb.fullSlots()/3
			state := func(i int) []int64 {
				s := make([]int64, tb.words)
				s[0] = int64(i + 1)
				return s
			}
			for i := range n {
				k := strconv.Itoa(i)
				tb.insert("", k, maphash.String(seed, k), state(i), math.MaxInt64)
			}
			check := func(stage string, present func(int) bool) {
				t.Helper()
				for i := range n {
					k := strconv.Itoa(i)
					s, ok, _ := tb.get(k, 0, maphash.String(seed, k), l)
					if ok != present(i) || ok && s[0] != int64(i+1) {
						t.Fatalf("%s: get(%q) = %v, %v; want present %v", stage, k, s, ok, present(i))
					}
				}
				full, counted := tb.fullSlots(), indexEntry*int64(len(tb.index.pos))+tb.prefixBytes()
				if tb.words == 1 {
					counted += tb.chunkCost(len(tb.first)) + int64(len(tb.ones))*tb.chunkCost(full)
				}
				for j, c := range tb.many {
					if j < len(tb.many)-1 && tb.chunkSlots(c) != full {
						t.Errorf("%s: chunk %d of %d holds %d slots, want %d", stage, j, len(tb.many), tb.chunkSlots(c), full)
					}
					counted += tb.chunkCost(tb.chunkSlots(c))
				}
				tb.each(0, func(p, k string, s []int64) bool {
					counted += tb.headBytes("", p+k)
					return true
				})
				if tb.bytes != counted || tb.n > tb.capSlots() {
					t.Errorf("%s: bytes %d, want %d; %d slots handed out of %d", stage, tb.bytes, counted, tb.n, tb.capSlots())
				}
			}
			check("inserted", func(int) bool { return true })
			for i := 0; i < n; i += 5 {
				k := strconv.Itoa(i)
				s, _, _ := tb.get(k, 0, maphash.String(seed, k), l)
				tb.remove("", k, maphash.String(seed, k), s)
			}
			check("removed", func(i int) bool { return i%5 != 0 })
			for i := 0; i < n; i += 5 {
				k := strconv.Itoa(i)
				tb.insert("", k, maphash.String(seed, k), state(i), math.MaxInt64)
			}
			check("reused", func(int) bool { return true })
			for i := range n {
				if i%8 != 0 {
					k := strconv.Itoa(i)
					s, _, _ := tb.get(k, 0, maphash.String(seed, k), l)
					tb.remove("", k, maphash.String(seed, k), s)
				}
			}
			tb.compact(4)
			check("compacted", func(i int) bool { return i%8 == 0 })
		})
	}
}

// seeded returns the hash of prefix+key under seed, as a Store's.
// eachMatches checks that tb.each gives every state of want its value
// (the first word), and returns how many it visited.
func eachMatches(t *testing.T, tb *table, stage string, want map[string]int64) int {
	t.Helper()
	seen := 0
	tb.each(0, func(p, k string, s []int64) bool {
		k = p + k
		if want[k] != s[0] {
			t.Errorf("%s: each gave %q with %v, want [%d]", stage, k, s, want[k])
		}
		seen++
		return true
	})
	return seen
}

func seeded(seed maphash.Seed) func(prefix, key string) uint64 {
	return func(prefix, key string) uint64 { return maphash.String(seed, prefix+key) }
}

// TestSameName checks sameName against joining, at every cut of equal
// and unequal names.
func TestSameName(t *testing.T) {
	names := []string{"", "a", "ab", "abc", "abd", "sluice:login:10.0.0.1", "sluice:login:10.0.0.2"}
	for _, x := range names {
		for _, y := range names {
			for i := range len(x) + 1 {
				for j := range len(y) + 1 {
					if got, want := sameName(x[:i], x[i:], y[:j], y[j:]), x == y; got != want {
						t.Fatalf("sameName(%q, %q, %q, %q) = %v, want %v", x[:i], x[i:], y[:j], y[j:], got, want)
					}
				}
			}
		}
	}
}

// TestTablePrefixes keeps one-word states under many prefixes: numbered
// ones (the first maxPrefixes), ones past that and ones too long to
// number, which keep their keys whole, with rests around inlineKey, and
// whole names whose prefix is numbered. Each state is found under any cut
// of its name (after its prefix too, by the prefix's number), each gives
// whole names, and
// what the table counts is what it holds, through removals and a
// compaction.
func TestTablePrefixes(t *testing.T) {
	seed := maphash.MakeSeed()
	tb := newTable(sluice.Limit{Rate: 1, Period: time.Second}, seeded(seed))
	want := map[string]int64{}
	for i := range 2000 {
		var prefix string
		switch i % 4 {
		case 0, 1:
			prefix = "ns:action" + strconv.Itoa((i/4*2+i%4)%300) + ":" // 300 prefixes: 45 past the numbered
		case 2:
			prefix = strings.Repeat("p", maxPrefixLen+1)
		}
		rest := strconv.Itoa(i) + strings.Repeat("r", []int{0, inlineKey - 4, inlineKey - 3, 40}[i/4%4])
		if i%8 == 3 {
			// The whole name as the key: kept unnumbered, though other
			// keys number its prefix.
			rest = "ns:action" + strconv.Itoa(i%300) + ":" + rest
		}
		want[prefix+rest] = int64(i + 1)
		tb.insert(prefix, rest, maphash.String(seed, prefix+rest), []int64{int64(i + 1)}, math.MaxInt64)
	}
	if len(tb.prefixes) != maxPrefixes {
		t.Errorf("numbered %d prefixes, want %d", len(tb.prefixes), maxPrefixes)
	}
	if len(tb.prefixAt) != len(tb.prefixes) {
		t.Errorf("prefixAt holds %d prefixes of %d", len(tb.prefixAt), len(tb.prefixes))
	}
	for i, p := range tb.prefixes { // past scanPrefixes, found by the map
		if j, known := tb.prefixIndex(p); j != i || !known {
			t.Errorf("prefixIndex(%q) = %d, %v; want %d", p, j, known, i)
		}
	}
	check := func(stage string) {
		t.Helper()
		for name, v := range want {
			h := maphash.String(seed, name)
			// Cut after the prefix twice: the first finds the prefix's
			// number for the second.
			pre := strings.LastIndexByte(name, ':') + 1
			for _, cut := range []int{0, len(name) / 2, len(name), pre, pre} {
				if w, ok := tb.lookupOne(name[:cut], name[cut:], h); !ok || w.state[0] != v {
					t.Fatalf("%s: lookupOne(%q, %q) found %v, want [%d]", stage, name[:cut], name[cut:], ok, v)
				}
			}
		}
		counted := indexEntry*int64(len(tb.index.pos)) + tb.prefixBytes()
		counted += tb.chunkCost(len(tb.first)) + int64(len(tb.ones))*tb.chunkCost(tb.fullSlots())
		for _, e := range tb.index.pos {
			if e != 0 && tb.one(tb.index.slotOf(e)).n == longKey {
				_, rest := tb.parts(tb.index.slotOf(e))
				counted += allocSize(int64(len(rest))) + longEntry
			}
		}
		seen := eachMatches(t, tb, stage, want)
		if seen != len(want) || tb.bytes != counted {
			t.Errorf("%s: each visited %d states, want %d; bytes %d, want %d", stage, seen, len(want), tb.bytes, counted)
		}
		if len(tb.long) > tb.len() {
			t.Errorf("%s: %d keys kept apart for %d states", stage, len(tb.long), tb.len())
		}
	}
	check("inserted")
	i := 0
	for name := range want {
		if i++; i%8 != 0 {
			tb.remove("", name, maphash.String(seed, name), nil)
			delete(want, name)
		}
	}
	check("removed")
	tb.compact(4)
	check("compacted")
}

// TestIndexRehash fills a one-word table past the size at which its
// index keeps the home bits of its entries' tags, so that growing and
// removing hash keys again, and checks that every state stays found.
func TestIndexRehash(t *testing.T) {
	seed := maphash.MakeSeed()
	tb := newTable(sluice.Limit{Rate: 1, Period: time.Second}, seeded(seed))
	const n = 100_000
	for i := range n {
		k := strconv.Itoa(i)
		tb.insert("p:", k, maphash.String(seed, "p:"+k), []int64{int64(i)}, math.MaxInt64)
	}
	if tb.index.homeBits() {
		t.Fatalf("index of %d slots keeps %d tag bits above %d slot bits: the test needs fewer", n, 32-tb.index.slotBits, tb.index.slotBits)
	}
	for i := 0; i < n; i += 3 {
		k := "p:" + strconv.Itoa(i)
		tb.remove("", k, maphash.String(seed, k), nil)
	}
	for i := range n {
		k := strconv.Itoa(i)
		w, ok := tb.lookupOne("p:", k, maphash.String(seed, "p:"+k))
		if want := i%3 != 0; ok != want || ok && w.state[0] != int64(i) {
			t.Fatalf("lookupOne(%q) found %v, want %v", k, ok, want)
		}
	}
	if want := n - (n+2)/3; tb.len() != want {
		t.Errorf("len() = %d, want %d", tb.len(), want)
	}
}
