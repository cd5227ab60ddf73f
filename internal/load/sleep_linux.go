package load

import (
	"syscall"
	"time"
)

// nap sleeps for d in the kernel, which wakes the thread within tens of
// microseconds, where a Go timer in an idle process may wake a
// millisecond late (see wait).
func nap(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // woken early (EINTR): the caller sleeps again
}
