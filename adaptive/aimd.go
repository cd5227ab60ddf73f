package adaptive

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// AIMDConfig configures an AIMD limit. The zero value of each field means
// its default.
type AIMDConfig struct {
	// Initial is the limit to start from. Default 20.
	Initial int
	// Min and Max bound the limit. Defaults 1 and 1000.
	Min, Max int
	// Backoff multiplies the limit on each dropped or slow sample, in
	// (0, 1). Default 0.9.
	Backoff float64
	// Timeout is the latency above which a completed request counts as
	// dropped. Default 0: none (only dropped requests shrink the limit).
	Timeout time.Duration
}

// An AIMD is a limit of additive increase and multiplicative decrease:
// see the package documentation. Safe for concurrent use.
type AIMD struct {
	mu    sync.Mutex
	limit float64
	cut   time.Time // when the limit was last cut
	c     AIMDConfig
}

// NewAIMD returns an AIMD limit configured by c.
func NewAIMD(c AIMDConfig) (*AIMD, error) {
	c.Initial, c.Min, c.Max = or(c.Initial, 20), or(c.Min, 1), or(c.Max, 1000)
	if c.Backoff == 0 {
		c.Backoff = 0.9
	}
	if err := checkBounds(c.Initial, c.Min, c.Max); err != nil {
		return nil, err
	}
	if !(c.Backoff > 0 && c.Backoff < 1) || c.Timeout < 0 {
		return nil, fmt.Errorf("adaptive: backoff %v must be in (0, 1) and timeout %v not negative", c.Backoff, c.Timeout)
	}
	return &AIMD{limit: float64(c.Initial), c: c}, nil
}

// Limit returns the current limit.
func (a *AIMD) Limit() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return int(a.limit)
}

// Observe records a sample; see sluice.AdaptiveLimit.
func (a *AIMD) Observe(now time.Time, rtt time.Duration, inflight int, dropped bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case dropped || a.c.Timeout > 0 && rtt > a.c.Timeout:
		a.limit = backoff(a.limit, &a.cut, now, rtt, a.c.Backoff, a.c.Min)
	case 2*inflight >= int(a.limit):
		a.limit = math.Min(float64(a.c.Max), a.limit+1/a.limit)
	}
}

func or(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func checkBounds(initial, lo, hi int) error {
	if lo < 1 || hi < lo || initial < lo || initial > hi {
		return fmt.Errorf("adaptive: want 1 ≤ min (%d) ≤ initial (%d) ≤ max (%d)", lo, initial, hi)
	}
	return nil
}

// backoff returns limit cut by factor, no lower than lo, and records now
// in cut; but a sample of a request that started by the last cut
// leaves it as it is: the requests admitted under the old limit report
// the congestion it caused, and the limit is cut once for it, as TCP
// cuts its window once per round trip, not once per lost packet.
func backoff(limit float64, cut *time.Time, now time.Time, rtt time.Duration, factor float64, lo int) float64 {
	if !cut.IsZero() && !now.Add(-rtt).After(*cut) {
		return limit
	}
	*cut = now
	return math.Max(float64(lo), math.Floor(limit*factor))
}
