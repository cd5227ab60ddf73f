//go:build !linux

package load

import "time"

// nap sleeps for d (see the Linux version).
func nap(d time.Duration) { time.Sleep(d) }
