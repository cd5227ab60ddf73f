// Package cputime reads the CPU time of the running process and of
// others: for the figures that report CPU per operation (benchmarks,
// sluice simulate's report), on a shared machine steadier than the wall
// time, which counts the time other processes held the cores.
package cputime

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
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

// clockTicks is the unit of /proc/<pid>/stat's times: USER_HZ, 100 on
// every Linux the project runs on.
const clockTicks = 100

// Of returns the CPU time that process pid has used so far: for the
// servers a test starts (sluice serve, redis-server). It sums the time
// on the CPU of the process's threads, in nanoseconds, from
// /proc/<pid>/task/*/schedstat; where the kernel keeps no schedstat, it
// reads user and system time from /proc/<pid>/stat, whose resolution is
// 10 ms: a figure of a few hundred milliseconds would move by whole
// percents with the tick. (Threads that ended are not counted by the
// first; the servers measured keep theirs.)
func Of(pid int) (time.Duration, error) {
	if d, err := schedstat(pid); err == nil {
		return d, nil
	}
	return stat(pid)
}

// schedstat returns the sum of the first field of the schedstat of every
// thread of pid: its time on the CPU, in ns.
func schedstat(pid int) (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended since the listing
		}
		if err != nil {
			return 0, err
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, fmt.Errorf("cputime: %s/%s/schedstat: empty", dir, t.Name())
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cputime: %s/%s/schedstat: %w", dir, t.Name(), err)
		}
		sum += ns
	}
	return time.Duration(sum), nil
}

// stat returns the user and system time of pid from /proc/<pid>/stat.
func stat(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: the fields
	// follow its last ')', from the third (state) on.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("cputime: /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("cputime: /proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("cputime: /proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}
