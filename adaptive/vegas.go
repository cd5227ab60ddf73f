package adaptive

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// VegasConfig configures a Vegas limit. The zero value of each field means
// its default.
type VegasConfig struct {
	// Initial is the limit to start from. Default 20.
	Initial int
	// Min and Max bound the limit. Defaults 1 and 1000.
	Min, Max int
	// Alpha and Beta are the estimated queue below which the limit grows
	// by one and above which it shrinks by one. Defaults 3 and 6.
	Alpha, Beta int
	// Backoff multiplies the limit on a dropped sample, in (0, 1).
	// Default 0.9.
	Backoff float64
	// ProbeEvery is how many samples pass before the no-load latency is
	// measured afresh, so that a backend that became slower for good is
	// not read as a queue forever: the limit is halved, to drain the
	// queue it built, and the smallest latency of the samples after
	// replaces the old. Default 1000.
	ProbeEvery int
}

// A Vegas is a limit in the manner of TCP Vegas: see the package
// documentation. Safe for concurrent use.
type Vegas struct {
	mu      sync.Mutex
	limit   float64
	noLoad  time.Duration // smallest latency since the last probe; 0 before any
	samples int           // since the last probe
	cut     time.Time     // when the limit was last cut for a drop
	c       VegasConfig
}

// NewVegas returns a Vegas limit configured by c.
func NewVegas(c VegasConfig) (*Vegas, error) {
	c.Initial, c.Min, c.Max = or(c.Initial, 20), or(c.Min, 1), or(c.Max, 1000)
	c.Alpha, c.Beta, c.ProbeEvery = or(c.Alpha, 3), or(c.Beta, 6), or(c.ProbeEvery, 1000)
	if c.Backoff == 0 {
		c.Backoff = 0.9
	}
	if err := checkBounds(c.Initial, c.Min, c.Max); err != nil {
		return nil, err
	}
	if c.Alpha < 1 || c.Beta <= c.Alpha || !(c.Backoff > 0 && c.Backoff < 1) || c.ProbeEvery < 1 {
		return nil, fmt.Errorf("adaptive: want 1 ≤ alpha (%d) < beta (%d), backoff %v in (0, 1), probe every %d ≥ 1",
			c.Alpha, c.Beta, c.Backoff, c.ProbeEvery)
	}
	return &Vegas{limit: float64(c.Initial), c: c}, nil
}

// Limit returns the current limit.
func (v *Vegas) Limit() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return int(v.limit)
}

// Observe records a sample; see sluice.AdaptiveLimit.
func (v *Vegas) Observe(now time.Time, rtt time.Duration, inflight int, dropped bool) {
	if rtt <= 0 {
		rtt = 1 // a clock that did not move: the fastest possible sample
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.samples++
	if v.samples > v.c.ProbeEvery {
		v.samples, v.noLoad = 0, 0
		v.limit = math.Max(float64(v.c.Min), math.Floor(v.limit/2))
	}
	if v.noLoad == 0 || rtt < v.noLoad {
		v.noLoad = rtt
	}
	switch {
	case dropped:
		v.limit = backoff(v.limit, &v.cut, now, rtt, v.c.Backoff, v.c.Min)
		return
	case 2*inflight < int(v.limit):
		return // too little load to learn from
	}
	queue := v.limit * (1 - float64(v.noLoad)/float64(rtt))
	switch {
	case queue < float64(v.c.Alpha):
		v.limit = math.Min(float64(v.c.Max), v.limit+1)
	case queue > float64(v.c.Beta):
		v.limit = math.Max(float64(v.c.Min), v.limit-1)
	}
}
