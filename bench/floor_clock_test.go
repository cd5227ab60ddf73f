package bench

import (
	"sync"
	"sync/atomic"
	"time"
)

// A floorClock is the floors' time, in Unix ns: an atomic that a goroutine
// sets every millisecond once started, as sluice's memory store keeps its
// coarse clock, or that a test sets by hand.
type floorClock struct {
	now  atomic.Int64
	stop chan struct{}
	done sync.WaitGroup
}

// start sets the time now, and every millisecond until close.
func (c *floorClock) start() {
	c.now.Store(time.Now().UnixNano())
	c.stop = make(chan struct{})
	c.done.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case now := <-t.C:
				c.now.Store(now.UnixNano())
			}
		}
	})
}

// close stops the clock, if it was started.
func (c *floorClock) close() {
	if c.stop != nil {
		close(c.stop)
		c.done.Wait()
	}
}
