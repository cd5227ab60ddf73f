package client

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestDenialCacheBound floods the cache with distinct denied keys, some
// of megabytes, as an attacker rotating keys would: it never holds more
// than its cap, nor keys longer than maxCacheKey, and a denial that
// keeps being hit survives the flood.
func TestDenialCacheBound(t *testing.T) {
	const max = 64
	c := newDenialCache(max)
	hot := cacheKey("login", "hot")
	c.put(hot, denial{cost: 1, until: t0.Add(time.Hour)}, t0)
	huge := strings.Repeat("x", 1<<20)
	for i := range 100_000 {
		key := strconv.Itoa(i)
		if i%1000 == 0 {
			key += huge
		}
		c.put(cacheKey("login", key), denial{cost: 1, until: t0.Add(time.Hour)}, t0)
		if _, ok := c.get(hot, 1, t0); !ok {
			t.Fatalf("the hot denial was evicted after %d other keys", i+1)
		}
	}
	if n := c.len(); n != max || len(c.slots) != max || cap(c.slots) > 2*max {
		t.Errorf("after 100,000 keys: %d entries, %d slots (cap %d); want %d", n, len(c.slots), cap(c.slots), max)
	}
	for k := range c.index {
		if len(k) > maxCacheKey {
			t.Fatalf("a key of %d bytes is cached, want at most %d", len(k), maxCacheKey)
		}
	}
}

// TestDenialCache checks what a cached denial answers: a check of its
// cost or more, until it expires; and that remove and clear forget.
func TestDenialCache(t *testing.T) {
	c := newDenialCache(4)
	k := cacheKey("api", "k")
	c.put(k, denial{cost: 2, until: t0.Add(time.Second)}, t0)
	tests := []struct {
		cost int
		at   time.Duration
		want bool
	}{
		{2, 0, true},
		{3, 999 * time.Millisecond, true},
		{1, 0, false}, // a cheaper check may pass
		{2, time.Second, false},
	}
	for _, tt := range tests {
		if _, ok := c.get(k, tt.cost, t0.Add(tt.at)); ok != tt.want {
			t.Errorf("get(cost %d, at +%v) = %v, want %v", tt.cost, tt.at, ok, tt.want)
		}
	}
	if c.len() != 0 {
		t.Errorf("len() = %d after the denial expired, want 0", c.len())
	}
	c.put(k, denial{cost: 1, until: t0.Add(time.Second)}, t0)
	c.remove(k)
	c.put(cacheKey("api", "j"), denial{cost: 1, until: t0.Add(time.Second)}, t0)
	if _, ok := c.get(k, 1, t0); ok {
		t.Error("get after remove found the denial")
	}
	c.clear()
	if c.len() != 0 {
		t.Errorf("len() = %d after clear, want 0", c.len())
	}
	if cacheKey("ab", "c") == cacheKey("a", "bc") {
		t.Error("cacheKey(ab, c) == cacheKey(a, bc)")
	}
}
