package load

import (
	"runtime"
	"syscall"
	"time"
)

// prSetTimerSlack is prctl's PR_SET_TIMERSLACK.
const prSetTimerSlack = 29

// lockPrecise locks the calling goroutine to its thread and asks Linux to
// wake that thread within a nanosecond of its sleeps' ends instead of
// the default 50 µs. The goroutine must not unlock: the thread, with its
// slack, is then discarded when the goroutine ends.
func lockPrecise() {
	runtime.LockOSThread()
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
}

// nap sleeps for d in the kernel. A Go timer would do, but when the
// process is otherwise idle its wake-up waits in epoll with millisecond
// resolution, which would add up to a millisecond of the generator's own
// lag to latencies measured from the intended send time; nanosleep wakes
// within tens of microseconds.
func nap(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // woken early (EINTR): the caller sleeps again
}
