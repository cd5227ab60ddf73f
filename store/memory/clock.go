package memory

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// DefaultResolution is the resolution of a Store's default clock: see
// Config.Resolution.
const DefaultResolution = time.Millisecond

// coarseGrains is how many resolutions a limit's grain (see coarseFits)
// must span for its requests to read the coarse clock: with ten, the
// clock's lag withholds at most a tenth of a burst, and only for one
// resolution.
const coarseGrains = 10

// idleTicks is how many ticks without a read stop the ticker: a second of
// idleness at the default resolution.
const idleTicks = 1000

// A clock is a Store's default clock: the wall time at New plus the
// monotonic time elapsed since, which costs one clock read instead of
// time.Now's two and never jumps when the wall clock is stepped (a step
// would look to a limiter like time running backwards or leaping ahead).
//
// Reading even the monotonic clock costs tens of nanoseconds on virtual
// machines, a third of a decision. So while the store is busy, a ticker
// goroutine reads it every res and publishes the reading, and requests
// whose limits tolerate it read that instead: an atomic load. The ticker
// starts on the first such read and stops after idleTicks ticks without
// one, or when the store closes.
type clock struct {
	base time.Time // with its monotonic reading
	wall int64     // base in Unix ns
	res  time.Duration

	last atomic.Int64 // the ticker's latest reading; 0 when it is not running
	used atomic.Bool  // last was read since the ticker's latest tick

	mu      sync.Mutex // guards running and closed, and starting the ticker
	running bool
	closed  bool
	stop    chan struct{}
	done    sync.WaitGroup
}

func newClock(res time.Duration) *clock {
	base := time.Now()
	return &clock{base: base, wall: base.UnixNano(), res: res, stop: make(chan struct{})}
}

// exact reads the monotonic clock.
func (c *clock) exact() int64 { return c.wall + int64(time.Since(c.base)) }

// fits reports whether a request for limits may take a coarse reading.
func (c *clock) fits(limits []sluice.Limit) bool {
	return c.res > 0 && coarseFits(limits, c.res)
}

// coarse returns the ticker's latest reading, starting the ticker if it
// is not running.
func (c *clock) coarse() int64 {
	if t := c.last.Load(); t != 0 {
		if !c.used.Load() { // write the shared line once per tick, not per read
			c.used.Store(true)
		}
		return t
	}
	return c.start()
}

// start starts the ticker unless it runs or the clock is closed, and
// returns its first reading (an exact one once closed). Every exact
// reading a coarse request gets is taken under mu, before the ticker's
// later ones, so no goroutine sees its coarse time go back.
func (c *clock) start() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.exact()
	}
	if !c.running {
		c.running = true
		c.last.Store(c.exact())
		c.used.Store(true)
		c.done.Add(1)
		go c.tick()
	}
	return c.last.Load()
}

// tick publishes a reading every res until the clock goes unread for
// idleTicks ticks or closes.
func (c *clock) tick() {
	defer c.done.Done()
	ticker := time.NewTicker(c.res)
	defer ticker.Stop()
	for idle := 0; idle < idleTicks; {
		select {
		case <-c.stop:
			idle = idleTicks
			continue
		case <-ticker.C:
		}
		c.last.Store(c.exact())
		if c.used.Swap(false) {
			idle = 0
		} else {
			idle++
		}
	}
	c.mu.Lock()
	c.running = false
	c.last.Store(0)
	c.mu.Unlock()
}

// close stops the ticker and waits for it; later reads are exact.
func (c *clock) close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.stop)
	}
	c.mu.Unlock()
	c.done.Wait()
}

// coarseFits reports whether every limit's grain spans at least
// coarseGrains resolutions, so that a reading up to res old decides it
// almost as an exact one would. The grain is the time a GCRA limit takes
// to refill its whole burst, a fixed window or a sliding log's period,
// and a sliding window counter's bucket width.
func coarseFits(limits []sluice.Limit, res time.Duration) bool {
	min := uint64(coarseGrains * res)
	for i := range limits {
		l := &limits[i]
		switch l.Algorithm {
		case sluice.GCRA:
			// Period·MaxBurst/Rate < min, multiplied out in 128 bits: no
			// division, no floating point (both cost tens of nanoseconds
			// here).
			hi, lo := bits.Mul64(uint64(l.Period), uint64(l.MaxBurst()))
			mhi, mlo := bits.Mul64(min, uint64(l.Rate))
			if hi < mhi || hi == mhi && lo < mlo {
				return false
			}
		case sluice.SlidingWindow, sluice.ApproxSlidingWindow:
			if uint64(l.Period) < min*uint64(l.BucketCount()) {
				return false
			}
		default:
			if uint64(l.Period) < min {
				return false
			}
		}
	}
	return true
}
