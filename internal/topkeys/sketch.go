// Package topkeys finds the heaviest keys of a stream in memory that does
// not grow with the number of keys: the Space-Saving algorithm (Metwally,
// Agrawal and El Abbadi, "Efficient computation of frequent and top-k
// elements in data streams", 2005) over k counters, kept sorted so that
// each count is O(1), and a Window of such sketches per time bucket that
// answers "the heaviest keys of the last minute".
//
// # Accuracy
//
// A Sketch of k counters reports every key counted more than n/k times
// of n, and overestimates a key by at most its Count.Err, itself at most
// n/k: Count-Err is a guaranteed lower bound. Keys that share the slots
// with many one-off keys (an attack rotating addresses) keep their rank
// as long as they are heavier than n/k.
package topkeys

import (
	"cmp"
	"hash/maphash"
	"slices"
)

// A Count is a key and how often a sketch counted it: at most Count
// times, and at least Count-Err.
type Count struct {
	Key   string `json:"key"`
	Count uint64 `json:"count"`
	Err   uint64 `json:"err"`
}

// A Sketch counts the keys of a stream in k counters (Space-Saving): a key
// not counted yet takes the slot of the lightest key, inheriting its
// count as error. The counters stay sorted by count, and a counted key
// moves only to the end of the run of its equal counts, so Add costs one
// hash of the key, a scan of the k hashes from the heaviest (256 bytes
// for k = 32) and a binary search of the counts: no map, no allocation,
// the same bounded work whatever the keys. Keys are told apart by a
// 64-bit hash under a random seed, which no one can aim collisions at.
//
// The zero value is not usable; use NewSketch. A Sketch is not safe for
// concurrent use.
type Sketch struct {
	seed maphash.Seed
	// Slot i holds the key keys[i] of hash hashes[i], counted counts[i]
	// times, errs[i] of them perhaps another key's. The slots are sorted
	// by count, ascending; unused ones (count 0) come first. The hashes
	// and counts, which every Add reads, are apart from the rest.
	hashes, counts []uint64
	keys           []string
	errs           []uint64
	total          uint64 // keys counted
}

// NewSketch returns a sketch of k counters (at least 1).
func NewSketch(k int) *Sketch {
	k = max(k, 1)
	return &Sketch{seed: maphash.MakeSeed(), hashes: make([]uint64, k), counts: make([]uint64, k),
		keys: make([]string, k), errs: make([]uint64, k)}
}

// Add counts one occurrence of key.
func (s *Sketch) Add(key string) { s.add(key, maphash.String(s.seed, key)) }

// add counts key, whose hash under s.seed is h.
func (s *Sketch) add(key string, h uint64) {
	s.total++
	i := s.find(h)
	if i < 0 {
		// Replace the lightest key, at slot 0; its count becomes the
		// newcomer's error.
		i = 0
		s.hashes[0], s.keys[0], s.errs[0] = h, key, s.counts[0]
	}
	s.increment(i)
}

// find returns the slot of the key of hash h, or -1. It scans from the
// heaviest keys, which come back most.
func (s *Sketch) find(h uint64) int {
	for i := len(s.hashes) - 1; i >= 0; i-- {
		if s.hashes[i] == h && s.counts[i] > 0 {
			return i
		}
	}
	return -1
}

// increment adds one to the count of slot i, keeping the slots sorted:
// it swaps slot i with the last slot of equal count (found by binary
// search), which then leads the run of the count above.
func (s *Sketch) increment(i int) {
	v := s.counts[i]
	j, lo := len(s.counts)-1, i // the last slot of count v is in [i, j]
	for lo < j {
		m := int(uint(lo+j+1) >> 1)
		if s.counts[m] == v {
			lo = m
		} else {
			j = m - 1
		}
	}
	if i != j {
		s.hashes[i], s.hashes[j] = s.hashes[j], s.hashes[i]
		s.keys[i], s.keys[j] = s.keys[j], s.keys[i]
		s.errs[i], s.errs[j] = s.errs[j], s.errs[i]
	}
	s.counts[j] = v + 1
}

// Total returns how many keys the sketch counted since its last Reset.
func (s *Sketch) Total() uint64 { return s.total }

// AppendTo appends the keys counted to dst, in no order, and returns it.
func (s *Sketch) AppendTo(dst []Count) []Count {
	for i, c := range s.counts {
		if c > 0 {
			dst = append(dst, Count{Key: s.keys[i], Count: c, Err: s.errs[i]})
		}
	}
	return dst
}

// Top returns the n heaviest keys, heaviest first.
func (s *Sketch) Top(n int) []Count { return top(s.AppendTo(nil), n) }

// Reset forgets every key, keeping the memory.
func (s *Sketch) Reset() {
	clear(s.hashes)
	clear(s.counts)
	clear(s.keys)
	clear(s.errs)
	s.total = 0
}

// top sorts cs heaviest first (ties by key, for a stable display) and
// returns at most n of them.
func top(cs []Count, n int) []Count {
	slices.SortFunc(cs, func(a, b Count) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Key, b.Key))
	})
	return cs[:min(n, len(cs))]
}
