package fallback

import (
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// A denyCache remembers, per actor, the last denial the primary gave and
// until when it holds, bounded to max actors.
type denyCache struct {
	mu  sync.Mutex
	max int
	m   map[actor]denial
}

type actor struct{ prefix, key string }

type denial struct {
	policy uint64 // policyHash of the request's limits
	op     sluice.Op
	cost   int
	d      sluice.Decision
	at     time.Time // when it was denied
	until  time.Time // at + RetryAfter
}

// policyHash identifies a policy: the limits, in order.
func policyHash(ls []sluice.Limit) uint64 {
	h := uint64(14695981039346656037)
	mix := func(v uint64) {
		for range 8 {
			h ^= v & 0xff
			h *= 1099511628211
			v >>= 8
		}
	}
	for _, l := range ls {
		mix(l.StateID())
		mix(uint64(l.Rate))
		mix(uint64(l.Burst))
	}
	return h
}

// lookup returns the cached denial for r at now, adjusted for the time
// elapsed, if one holds for r's cost, operation and policy.
func (c *denyCache) lookup(r *sluice.Request, now time.Time) (sluice.Decision, bool) {
	if c.max == 0 {
		return sluice.Decision{}, false
	}
	c.mu.Lock()
	e, ok := c.m[actor{r.Prefix, r.Key}]
	c.mu.Unlock()
	if !ok || !now.Before(e.until) || now.Before(e.at) || e.cost != r.Cost || e.op != r.Op ||
		e.policy != policyHash(r.Limits) {
		return sluice.Decision{}, false
	}
	d := e.d
	elapsed := now.Sub(e.at)
	d.RetryAfter -= elapsed
	d.ResetAfter = max(d.ResetAfter-elapsed, d.RetryAfter)
	d.Time = now
	return d, true
}

// store remembers a denial of r, when it has a wait worth caching.
func (c *denyCache) store(r *sluice.Request, d sluice.Decision, now time.Time) {
	if c.max == 0 || d.RetryAfter <= 0 {
		return
	}
	e := denial{policy: policyHash(r.Limits), op: r.Op, cost: r.Cost, d: d, at: now, until: now.Add(d.RetryAfter)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[actor]denial)
	}
	if len(c.m) >= c.max {
		for k, v := range c.m { // drop what has expired; else any one
			if !now.Before(v.until) || len(c.m) >= c.max {
				delete(c.m, k)
			}
			if len(c.m) < c.max*3/4 {
				break
			}
		}
	}
	c.m[actor{r.Prefix, r.Key}] = e
}

// forget drops the actor's denial: it was reset or refunded.
func (c *denyCache) forget(prefix, key string) {
	if c.max == 0 {
		return
	}
	c.mu.Lock()
	delete(c.m, actor{prefix, key})
	c.mu.Unlock()
}
