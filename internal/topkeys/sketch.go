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
// count as error. Add is O(1): the counters stay sorted by count, and a
// counted key moves only to the end of the run of its equal counts.
//
// The zero value is not usable; use NewSketch. A Sketch is not safe for
// concurrent use.
type Sketch struct {
	slots []slot         // sorted by count, ascending; unused slots (count 0) first
	index map[string]int // key → its slot
	last  map[uint64]int // count → the last slot holding it
	total uint64         // keys counted
}

type slot struct {
	key        string
	count, err uint64
}

// NewSketch returns a sketch of k counters (at least 1).
func NewSketch(k int) *Sketch {
	k = max(k, 1)
	s := &Sketch{slots: make([]slot, k), index: make(map[string]int, k), last: make(map[uint64]int, k)}
	s.last[0] = k - 1
	return s
}

// Add counts one occurrence of key.
func (s *Sketch) Add(key string) {
	s.total++
	i, ok := s.index[key]
	if !ok {
		// Replace the lightest key, at slot 0; its count becomes the
		// newcomer's error.
		i = 0
		if old := s.slots[0]; old.count > 0 {
			delete(s.index, old.key)
		}
		s.slots[0].key, s.slots[0].err = key, s.slots[0].count
		s.index[key] = 0
	}
	s.increment(i)
}

// increment adds one to the count of slot i, keeping the slots sorted:
// it swaps slot i with the last slot of equal count, which then leads
// the run of the count above.
func (s *Sketch) increment(i int) {
	v := s.slots[i].count
	j := s.last[v]
	if i != j {
		s.slots[i], s.slots[j] = s.slots[j], s.slots[i]
		if v > 0 { // else slot i now holds an unused counter
			s.index[s.slots[i].key] = i
		}
		s.index[s.slots[j].key] = j
	}
	if j > 0 && s.slots[j-1].count == v {
		s.last[v] = j - 1
	} else {
		delete(s.last, v)
	}
	s.slots[j].count = v + 1
	if _, ok := s.last[v+1]; !ok {
		s.last[v+1] = j
	}
}

// Total returns how many keys the sketch counted since its last Reset.
func (s *Sketch) Total() uint64 { return s.total }

// AppendTo appends the keys counted to dst, in no order, and returns it.
func (s *Sketch) AppendTo(dst []Count) []Count {
	for _, sl := range s.slots {
		if sl.count > 0 {
			dst = append(dst, Count{Key: sl.key, Count: sl.count, Err: sl.err})
		}
	}
	return dst
}

// Top returns the n heaviest keys, heaviest first.
func (s *Sketch) Top(n int) []Count { return top(s.AppendTo(nil), n) }

// Reset forgets every key, keeping the memory.
func (s *Sketch) Reset() {
	clear(s.slots)
	clear(s.index)
	clear(s.last)
	s.last[0] = len(s.slots) - 1
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
