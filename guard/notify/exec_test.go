package notify_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/guard/notify"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// script writes an executable file in dir and returns its path. The
// test's scripts are run by the kernel's #! like any program; the Exec
// never starts a shell.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExecArgvNoShell: the fields reach the command as arguments, hostile
// bytes and all, and nothing in them is run.
func TestExecArgvNoShell(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // where a shell would have touched PWNED
	out := filepath.Join(dir, "args")
	prog := script(t, dir, "record", `out=$1; shift; printf '%s\0' "$@" > "$out"; env | grep ^SLUICE_KEY= | head -c 64 > "$out.env"`)
	x, err := notify.NewExec([]string{prog, out, "{event}", "{key}", "--until={until}", "{network}", "{jail}:{offences}"})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{hostileKey, "203.0.113.7", "nul\x00byte", "-rf"} {
		if err := x.Deliver(context.Background(), event(key)); err != nil {
			t.Fatalf("Deliver(%q): %v", key, err)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		network := ""
		if key == "203.0.113.7" {
			network = "203.0.113.7/32"
		}
		want := []string{"ban", strings.ReplaceAll(key, "\x00", `\x00`), "--until=2030-01-01T13:00:00Z", network, "login:1"}
		if args := strings.Split(strings.TrimSuffix(string(got), "\x00"), "\x00"); !slices.Equal(args, want) {
			t.Errorf("key %q: the command got %q, want %q", key, args, want)
		}
	}
	for _, f := range []string{"PWNED", "PWNED2", "x"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s exists: something ran the key as a command", f)
		}
	}
}

// TestExecTimeoutKillsGroup: a command that hangs, and what it started,
// are killed at the timeout, and the event counted as dropped.
func TestExecTimeoutKillsGroup(t *testing.T) {
	sleep := testserver.Binary(t, "sleep")
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	hang := script(t, dir, "hang", sleep+" 1000 & echo $$ $! > "+pids+"; wait\n")
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"sleep", []string{sleep, "1000"}},
		{"script and its child", []string{hang, "{key}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := notify.NewExec(tc.argv)
			if err != nil {
				t.Fatal(err)
			}
			obs := &counter{}
			sink := notify.NewSink(x, notify.SinkConfig{Name: "block", Attempts: 1, Timeout: 200 * time.Millisecond, Observer: obs})
			sink.Notify(event("203.0.113.7"))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sink.Close(ctx) // waits for the attempt, which the timeout ends
			if st := sink.Stats(); st.Failed != 1 || st.Attempts != 1 || st.Sent != 0 {
				t.Errorf("Stats() = %+v, want 1 failed attempt, 1 dropped", st)
			}
			if obs.dropped[notify.DropAttempts] != 1 {
				t.Errorf("Observer counted %+v", obs.dropped)
			}
			if tc.argv[0] != hang {
				return
			}
			data, err := os.ReadFile(pids)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range strings.Fields(string(data)) {
				pid, _ := strconv.Atoi(f)
				if !gone(pid, 10*time.Second) {
					t.Errorf("process %d of the command's group still runs", pid)
				}
			}
		})
	}
}

// gone polls until process pid no longer runs (missing, or a zombie
// waiting for init), for at most d.
func gone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return true
		}
		time.Sleep(10 * time.Millisecond) // a poll with a deadline
	}
	return false
}

// TestExecOutputBounded: a failing command's output is kept up to a
// bound in the error.
func TestExecOutputBounded(t *testing.T) {
	dir := t.TempDir()
	noisy := script(t, dir, "noisy", "i=0; while [ $i -lt 2000 ]; do echo 0123456789; i=$((i+1)); done; exit 3\n")
	x, err := notify.NewExec([]string{noisy})
	if err != nil {
		t.Fatal(err)
	}
	err = x.Deliver(context.Background(), event("k"))
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "bytes more") || len(err.Error()) > 6<<10 {
		t.Errorf("Deliver = %d bytes of error %.200q…, want exit status 3 and at most 4 KiB of output", len(err.Error()), err)
	}
}

// TestCheckArgv refuses argv that would need a shell or a guess.
func TestCheckArgv(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		ok   bool
	}{
		{[]string{"/usr/local/bin/block", "{key}", "{until}"}, true},
		{[]string{"/usr/sbin/ipset", "add", "banned", "{network}", "timeout", "600"}, true},
		{nil, false},
		{[]string{""}, false},
		{[]string{"block", "{key}"}, false},
		{[]string{"/bin/{jail}"}, false},
		{[]string{"/usr/bin/logger", "{username}"}, false},
	} {
		if err := notify.CheckArgv(tc.argv); (err == nil) != tc.ok {
			t.Errorf("CheckArgv(%q) = %v, want ok %v", tc.argv, err, tc.ok)
		}
	}
}
