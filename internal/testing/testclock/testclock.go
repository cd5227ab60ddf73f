// Package testclock is the tests' settable clock: a time that moves only
// when a test moves it, so that a test steps through a limit's windows on
// a grid instead of sleeping. It is safe for concurrent use: the code
// under test reads it from goroutines of its own (sweepers, servers).
package testclock

import (
	"sync/atomic"
	"time"
)

// T0 is where the tests' clocks start: a real date, well clear of Unix 0.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// A Clock is a settable time, in UTC. The zero value reads the Unix
// epoch; New starts one elsewhere.
type Clock struct{ ns atomic.Int64 }

// New returns a Clock reading t.
func New(t time.Time) *Clock {
	c := &Clock{}
	c.Set(t)
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

// Advance moves the clock by d (back, if d is negative).
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// Set sets the clock to t.
func (c *Clock) Set(t time.Time) { c.ns.Store(t.UnixNano()) }
