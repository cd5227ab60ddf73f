package client

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// maxCacheKey is the longest cache key kept as it is; longer ones (a
// key of megabytes, from an attacker) are replaced by a hash, so that an
// entry costs a bounded number of bytes.
const maxCacheKey = 256

// cacheKey names the denials of key under rule: the rule's length comes
// first, so that no rule and key can spell another's. It never starts
// with '#', which marks a hashed key.
func cacheKey(rule, key string) string {
	k := strconv.Itoa(len(rule)) + ":" + rule + key
	if len(k) <= maxCacheKey {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "#" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// A denial is a cached denial of a key: checks of cost or more are
// denied until until.
type denial struct {
	cost  int
	limit sluice.Limit
	until time.Time // when the cache stops denying: before a check of cost may pass
	retry time.Time // when the service said a check of cost may pass
	reset time.Time // when the limit's state is empty again
}

// slot is a place of the cache's clock; key "" marks it free.
type slot struct {
	key string
	denial
	used bool // hit since the hand last passed
}

// A denialCache holds at most max denials, evicting with the CLOCK
// algorithm (a second chance for entries hit since the hand last
// passed; expired entries go first). Its memory is bounded by max
// entries of at most maxCacheKey bytes of key, whatever the number of
// distinct keys denied. Safe for concurrent use.
type denialCache struct {
	mu    sync.Mutex
	max   int
	index map[string]int // key → its slot
	slots []slot         // at most max
	hand  int
}

func newDenialCache(max int) *denialCache {
	return &denialCache{max: max, index: make(map[string]int)}
}

// get returns the denial of key that denies a check of cost at now.
func (c *denialCache) get(key string, cost int, now time.Time) (denial, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.index[key]
	if !ok {
		return denial{}, false
	}
	s := &c.slots[i]
	if !now.Before(s.until) {
		c.free(i)
		return denial{}, false
	}
	if cost < s.cost {
		return denial{}, false // a cheaper check may pass: ask
	}
	s.used = true
	return s.denial, true
}

// put caches d for key at now, replacing any denial of key.
func (c *denialCache) put(key string, d denial, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i, ok := c.index[key]; ok {
		c.slots[i].denial = d
		return
	}
	i := len(c.slots)
	if i < c.max {
		c.slots = append(c.slots, slot{})
	} else {
		i = c.victim(now)
		c.free(i)
	}
	c.slots[i] = slot{key: key, denial: d}
	c.index[key] = i
}

// victim returns the slot to reuse: the first the hand finds free,
// expired at now, or not used since it last passed. It moves at most
// once round the clock and one slot more, since each slot it passes
// loses its used bit.
func (c *denialCache) victim(now time.Time) int {
	for {
		i := c.hand
		c.hand = (c.hand + 1) % len(c.slots)
		s := &c.slots[i]
		if s.key == "" || !s.used || !now.Before(s.until) {
			return i
		}
		s.used = false
	}
}

// free empties slot i.
func (c *denialCache) free(i int) {
	if k := c.slots[i].key; k != "" {
		delete(c.index, k)
	}
	c.slots[i] = slot{}
}

// remove forgets the denial of key.
func (c *denialCache) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i, ok := c.index[key]; ok {
		c.free(i)
	}
}

// clear forgets every denial.
func (c *denialCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.index)
	c.slots = c.slots[:0]
	c.hand = 0
}

// len returns how many denials the cache holds.
func (c *denialCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.index)
}
