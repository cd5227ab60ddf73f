//go:build !linux

package load

import "time"

// lockPrecise does nothing here: see the Linux version.
func lockPrecise() {}

// nap sleeps for d.
func nap(d time.Duration) { time.Sleep(d) }
