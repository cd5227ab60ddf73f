package topkeys

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"time"
)

// WindowConfig configures a Window. The zero value of each field means
// its default.
type WindowConfig struct {
	// Buckets is how many time buckets the window spans. Default 6.
	Buckets int
	// Width is the length of a bucket. Default 10s: with 6 buckets, the
	// window is the last minute (50 to 60 s of it, by the bucket edges).
	Width time.Duration
	// Shards splits each bucket by a hash of the key, so that concurrent
	// adds rarely wait for each other; rounded up to a power of two.
	// Default 8.
	Shards int
	// K is the number of counters of each shard of each bucket. Default
	// 32: a window holds at most Buckets×Shards×K keys.
	K int
}

// A Window finds the heaviest keys of a sliding time window: one Sketch
// per time bucket and shard, reset when its bucket comes round again. Its
// memory is fixed by its configuration, whatever the number of keys, and
// Add is O(1) under the lock of one shard.
//
// The zero value is not usable; use NewWindow. A Window is safe for
// concurrent use.
type Window struct {
	width  int64 // ns
	seed   maphash.Seed
	shards int
	k      int
	cells  []cell // bucket b, shard s at b*shards+s
}

type cell struct {
	mu     sync.Mutex
	epoch  int64 // the bucket's number (time / width) its sketch counts
	sketch *Sketch
	_      [40]byte // keeps neighbouring cells off one cache line
}

// NewWindow returns a window configured by c.
func NewWindow(c WindowConfig) *Window {
	c.Buckets = orDefault(c.Buckets, 6)
	c.Shards = 1 << bits.Len(uint(orDefault(c.Shards, 8)-1))
	c.K = orDefault(c.K, 32)
	if c.Width <= 0 {
		c.Width = 10 * time.Second
	}
	w := &Window{width: int64(c.Width), seed: maphash.MakeSeed(), shards: c.Shards, k: c.K,
		cells: make([]cell, c.Buckets*c.Shards)}
	for i := range w.cells {
		w.cells[i].epoch = -1
	}
	return w
}

// orDefault returns v, or def when v is not positive.
func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// Span returns the length of the window.
func (w *Window) Span() time.Duration {
	return time.Duration(w.width * int64(len(w.cells)/w.shards))
}

// Add counts key at time now.
func (w *Window) Add(now time.Time, key string) {
	epoch := now.UnixNano() / w.width
	h := maphash.String(w.seed, key)
	c := w.cell(epoch, int(h&uint64(w.shards-1)))
	c.mu.Lock()
	if c.epoch != epoch {
		if c.epoch > epoch { // a late add of a bucket already replaced
			c.mu.Unlock()
			return
		}
		if c.sketch == nil {
			c.sketch = NewSketch(w.k)
			c.sketch.seed = w.seed // so that the window's hash serves it
		} else {
			c.sketch.Reset()
		}
		c.epoch = epoch
	}
	c.sketch.add(key, h)
	c.mu.Unlock()
}

func (w *Window) cell(epoch int64, shard int) *cell {
	buckets := int64(len(w.cells) / w.shards)
	return &w.cells[int(epoch%buckets)*w.shards+shard]
}

// Top returns the n heaviest keys of the window that ends at now,
// heaviest first, with their counts and errors summed over its buckets,
// and the number of keys counted in the window. Count-Err is a lower
// bound of a key's count in the window; Count an estimate of it, which
// misses the occurrences that a bucket counted and then evicted.
func (w *Window) Top(now time.Time, n int) ([]Count, uint64) {
	epoch := now.UnixNano() / w.width
	buckets := int64(len(w.cells) / w.shards)
	sums := map[string]Count{}
	var total uint64
	var buf []Count
	for i := range w.cells {
		c := &w.cells[i]
		c.mu.Lock()
		if c.sketch != nil && c.epoch > epoch-buckets && c.epoch <= epoch {
			buf = c.sketch.AppendTo(buf[:0])
			total += c.sketch.Total()
		} else {
			buf = buf[:0]
		}
		c.mu.Unlock()
		for _, b := range buf {
			s := sums[b.Key]
			s.Key, s.Count, s.Err = b.Key, s.Count+b.Count, s.Err+b.Err
			sums[b.Key] = s
		}
	}
	out := make([]Count, 0, len(sums))
	for _, s := range sums {
		out = append(out, s)
	}
	return top(out, n), total
}
