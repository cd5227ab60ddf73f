// Package cputime reads the CPU time of the running process, for
// benchmarks that report CPU per operation: on a shared machine, steadier
// than the wall time, which counts the time other processes held the
// cores.
package cputime

import (
	"syscall"
	"time"
)

// Self returns the CPU time the process has used so far, user and
// system, or 0 if the system will not tell.
func Self() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
