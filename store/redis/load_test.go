package redis

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/store/fallback"
)

// TestRedisKilled kills Redis under load from 16 goroutines, behind
// store/fallback, and restarts it: no error reaches the callers, the
// policy answers while Redis is gone, the goroutines do not grow, and
// decisions come from Redis again after the restart. It logs the slowest
// decision and how long after the restart Redis decided again.
func TestRedisKilled(t *testing.T) {
	srv := testserver.StartRedis(t)
	primary := newStore(t, Config{Addrs: []string{srv.Addr}})
	const timeout = 200 * time.Millisecond
	for _, policy := range []sluice.FailurePolicy{sluice.FailLocal, sluice.FailClosed} {
		t.Run(policy.String(), func(t *testing.T) {
			var firstErr atomic.Value
			s, err := fallback.New(fallback.Config{Primary: primary, Policy: policy, Timeout: timeout, Cooldown: 250 * time.Millisecond,
				OnError: func(err error) { firstErr.CompareAndSwap(nil, err.Error()) }})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			prefix := uniquePrefix(t)
			limits := []sluice.Limit{{Rate: 1000, Period: time.Hour}}
			var (
				phase           atomic.Int32 // 0 up, 1 down (until the breaker closes), 2 back
				decided, denied [3]atomic.Int64
				errs            atomic.Int64
				slowest         atomic.Int64
				mostGoroutines  atomic.Int64
				stop            = make(chan struct{})
				wg              sync.WaitGroup
			)
			goroutines := runtime.NumGoroutine()
			for g := range 16 {
				wg.Go(func() {
					for i := 0; i < 200_000; i++ { // bounded; stop ends it sooner
						select {
						case <-stop:
							return
						default:
						}
						start := time.Now()
						d, err := s.Decide(context.Background(), sluice.Request{Prefix: prefix, Key: strconv.Itoa(g*100 + i%100), Limits: limits, Cost: 1})
						took := int64(time.Since(start))
						for old := slowest.Load(); took > old && !slowest.CompareAndSwap(old, took); old = slowest.Load() {
						}
						p := phase.Load()
						if err != nil {
							errs.Add(1)
							continue
						}
						decided[p].Add(1)
						if !d.Allowed {
							denied[p].Add(1)
						}
						if p > 0 && i%100 == 0 {
							n := int64(runtime.NumGoroutine())
							for old := mostGoroutines.Load(); n > old && !mostGoroutines.CompareAndSwap(old, n); old = mostGoroutines.Load() {
							}
						}
						// Pace the load: a policy answers at once, and 16
						// goroutines spinning on 2 cores would starve the rest.
						time.Sleep(100 * time.Microsecond)
					}
				})
			}
			waitFor(t, "decisions before the kill", func() bool { return decided[0].Load() > 500 })
			if e := firstErr.Load(); e != nil {
				t.Errorf("error with Redis up: %v", e)
			}
			loaded := runtime.NumGoroutine() // the workers and the client's connections
			phase.Store(1)
			srv.Stop()
			waitFor(t, "the breaker to open", s.Open)
			down := decided[1].Load()
			waitFor(t, "decisions while Redis is down", func() bool { return decided[1].Load() > down+500 })
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			restarted := time.Now()
			waitFor(t, "the breaker to close", func() bool { return !s.Open() })
			back := time.Since(restarted)
			phase.Store(2)
			waitFor(t, "decisions after the restart", func() bool { return decided[2].Load() > 500 })
			close(stop)
			wg.Wait()

			if n := errs.Load(); n != 0 {
				t.Errorf("%d decisions returned errors, want the policy's answers", n)
			}
			switch policy {
			case sluice.FailClosed:
				if denied[1].Load() == 0 {
					t.Errorf("fail closed: no denial while Redis was down")
				}
			case sluice.FailLocal:
				if denied[1].Load() != 0 {
					t.Errorf("local fallback: %d denials of 1000/h actors", denied[1].Load())
				}
			}
			if denied[2].Load() != 0 || denied[0].Load() != 0 {
				t.Errorf("denials with Redis up: %d before, %d after", denied[0].Load(), denied[2].Load())
			}
			// Beside the workers: the client's connection goroutines and one
			// replay at most. Nothing per request.
			if g := mostGoroutines.Load(); g > int64(loaded)+8 {
				t.Errorf("goroutines: %d under load with Redis up, up to %d with Redis down or back", loaded, g)
			}
			if g := runtime.NumGoroutine(); g > goroutines+8 {
				t.Errorf("goroutines: %d before the load, %d after", goroutines, g)
			}
			st := s.Stats()
			t.Logf("%v: decisions up/down/restarted %d/%d/%d, slowest %v (timeout %v), Redis deciding again %v after its restart, stats %+v",
				policy, decided[0].Load(), decided[1].Load(), decided[2].Load(), time.Duration(slowest.Load()), timeout, back, st)
		})
	}
}

// waitFor polls cond every 10 ms for at most 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition other goroutines change
	}
}

// TestAtomicProcesses runs several OS processes (this test binary, as
// TestHelperProcess) × many goroutines taking from one key at one instant,
// for each algorithm: exactly the limit is admitted.
func TestAtomicProcesses(t *testing.T) {
	srv := sharedServer(t)
	const procs, goroutines, takes = 4, 16, 10 // 640 takes per algorithm
	for _, l := range []sluice.Limit{
		{Rate: 100, Period: time.Hour, Burst: 150},
		{Rate: 150, Period: time.Hour, Algorithm: sluice.FixedWindow},
		{Rate: 150, Period: time.Hour, Algorithm: sluice.SlidingWindow},
		{Rate: 150, Period: time.Hour, Algorithm: sluice.ApproxSlidingWindow},
		{Rate: 150, Period: time.Hour, Algorithm: sluice.SlidingLog},
	} {
		t.Run(l.String(), func(t *testing.T) {
			prefix := uniquePrefix(t)
			cmds := make([]*exec.Cmd, procs)
			outs := make([]*bytes.Buffer, procs)
			for i := range cmds {
				cmds[i] = exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
				cmds[i].Env = append(os.Environ(), helperEnv+"="+strings.Join([]string{
					srv.Addr, prefix, l.String(), strconv.Itoa(goroutines), strconv.Itoa(takes)}, "|"))
				outs[i] = new(bytes.Buffer)
				cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
				if err := cmds[i].Start(); err != nil {
					t.Fatal(err)
				}
			}
			admitted := 0
			for i, c := range cmds {
				if err := c.Wait(); err != nil {
					t.Fatalf("helper process %d: %v\n%s", i, err, outs[i])
				}
				var n int
				if _, err := fmt.Sscanf(lastLine(outs[i].String(), "admitted "), "admitted %d", &n); err != nil {
					t.Fatalf("helper process %d output %q: %v", i, outs[i], err)
				}
				admitted += n
			}
			if want := l.MaxBurst(); admitted != want {
				t.Errorf("%d processes × %d goroutines × %d takes admitted %d, want exactly %d",
					procs, goroutines, takes, admitted, want)
			}
		})
	}
}

func lastLine(out, prefix string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}

// TestHelperProcess is the body of one process of TestAtomicProcesses; it
// does nothing unless that test started it.
func TestHelperProcess(t *testing.T) {
	env := os.Getenv(helperEnv)
	if env == "" {
		return
	}
	f := strings.Split(env, "|")
	l, err := sluice.ParseLimit(f[2])
	if err != nil {
		t.Fatal(err)
	}
	goroutines, _ := strconv.Atoi(f[3])
	takes, _ := strconv.Atoi(f[4])
	s, err := New(Config{Addrs: []string{f[0]}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range takes {
				d, err := s.Decide(context.Background(), sluice.Request{Prefix: f[1], Key: "one", Limits: []sluice.Limit{l}, Cost: 1, Now: t0})
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("admitted %d\n", admitted.Load())
}
