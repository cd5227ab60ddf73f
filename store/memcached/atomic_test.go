package memcached

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// trips counts the round trips and writes without wait a store has made.
func trips(s *Store) (roundTrips, sends int64) {
	st := s.Stats()
	return st.RoundTrips, st.Sends
}

func uniquePrefix(t testing.TB) string {
	return "t" + strconv.FormatUint(rand.Uint64(), 36) + ":"
}

// TestRoundTrips proves the cost of each kind of decision: a counter
// decision is one round trip; a denial adds a rollback written without
// waiting; opening a new window adds a head update written without
// waiting; GCRA and sliding log need a second round trip to write their
// state, only when allowed.
func TestRoundTrips(t *testing.T) {
	s := newStore(t, Config{Addrs: []string{testserver.StartMemcached(t).Addr}})
	fixed := sluice.Limit{Rate: 3, Period: time.Minute, Algorithm: sluice.FixedWindow}
	sliding := sluice.Limit{Rate: 3, Period: time.Minute, Algorithm: sluice.SlidingWindow, Buckets: 6}
	approx := sluice.Limit{Rate: 3, Period: time.Minute, Algorithm: sluice.ApproxSlidingWindow, Buckets: 6}
	gcra := sluice.Limit{Rate: 3, Period: time.Minute}
	type step struct {
		op         sluice.Op
		at         time.Duration
		allowed    bool
		roundTrips int64
		sends      int64
	}
	counterSteps := []step{
		{sluice.OpTake, 0, true, 1, 0},                   // fresh actor: head created in the same pipeline
		{sluice.OpTake, time.Second, true, 1, 0},         // same window
		{sluice.OpPeek, time.Second, true, 1, 0},         // peek
		{sluice.OpTake, 2 * time.Second, true, 1, 0},     // last one
		{sluice.OpTake, 3 * time.Second, false, 2, 0},    // denied: rollback waited for
		{sluice.OpPeek, 4 * time.Second, false, 1, 0},    // peek at a full window
		{sluice.OpTake, 5 * time.Second, false, 1, 0},    // denied again: decided by a peek
		{sluice.OpTake, 2 * time.Minute, true, 1, 1},     // new window: head update sent
		{sluice.OpTake, 2*time.Minute + 1, true, 1, 0},   // same window again
		{sluice.OpReset, 2*time.Minute + 2, false, 1, 0}, // reset: one round trip
		{sluice.OpTake, 2*time.Minute + 3, true, 1, 1},   // new generation known locally
	}
	for _, tc := range []struct {
		limits []sluice.Limit
		steps  []step
	}{
		{[]sluice.Limit{fixed}, counterSteps},
		{[]sluice.Limit{sliding}, counterSteps},
		{[]sluice.Limit{approx}, counterSteps},
		{[]sluice.Limit{fixed, sliding}, counterSteps},
		{[]sluice.Limit{gcra}, []step{
			{sluice.OpTake, 0, true, 2, 0},   // read, then compare-and-set
			{sluice.OpPeek, 0, true, 1, 0},   // read
			{sluice.OpTake, 0, true, 1, 0},   // the state read is remembered: compare-and-set only
			{sluice.OpTake, 0, true, 1, 0},   // and the state written
			{sluice.OpTake, 0, false, 1, 0},  // denied on what is remembered: read to be sure
			{sluice.OpReset, 0, false, 1, 0}, // delete
			{sluice.OpTake, 0, true, 2, 0},   // nothing remembered
		}},
	} {
		t.Run(policyName(tc.limits), func(t *testing.T) {
			prefix := uniquePrefix(t)
			for i, st := range tc.steps {
				r := sluice.Request{Prefix: prefix, Key: "actor", Limits: tc.limits, Op: st.op, Cost: 1, Now: t0.Add(st.at)}
				if st.op == sluice.OpReset {
					r.Cost = 0
				}
				rt0, s0 := trips(s)
				d, err := s.Decide(context.Background(), r)
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				rt1, s1 := trips(s)
				if st.op != sluice.OpReset && d.Allowed != st.allowed {
					t.Errorf("step %d (%v at +%v): Allowed = %v, want %v", i, st.op, st.at, d.Allowed, st.allowed)
				}
				if rt1-rt0 != st.roundTrips || s1-s0 != st.sends {
					t.Errorf("step %d (%v at +%v): %d round trips + %d sends, want %d + %d", i, st.op, st.at, rt1-rt0, s1-s0, st.roundTrips, st.sends)
				}
			}
		})
	}
}

// TestRollback checks the documented non-atomic step of a policy: a take
// that one limit denies was counted by the counter limits that allowed
// it, and is taken back, so nothing stays consumed.
func TestRollback(t *testing.T) {
	s := newStore(t, Config{Addrs: []string{testserver.StartMemcached(t).Addr}})
	fixed := sluice.Limit{Rate: 5, Period: time.Hour, Algorithm: sluice.FixedWindow}
	sliding := sluice.Limit{Rate: 5, Period: time.Hour, Algorithm: sluice.SlidingWindow}
	gcra := sluice.Limit{Rate: 1, Period: time.Hour}
	prefix := uniquePrefix(t)
	req := func(op sluice.Op, limits ...sluice.Limit) sluice.Request {
		return sluice.Request{Prefix: prefix, Key: "k", Limits: limits, Op: op, Cost: 1, Now: t0}
	}
	for i, want := range []bool{true, false, false, false} {
		d, err := s.Decide(context.Background(), req(sluice.OpTake, fixed, sliding, gcra))
		if err != nil || d.Allowed != want {
			t.Fatalf("take %d = %v, %v; want allowed %v", i, d.Allowed, err, want)
		}
	}
	for _, l := range []sluice.Limit{fixed, sliding} {
		d, err := s.Decide(context.Background(), req(sluice.OpPeek, l))
		if err != nil || d.Remaining != 3 {
			t.Errorf("peek(%v) after 1 allowed and 3 denied takes: Remaining %d, %v; want 3", l, d.Remaining, err)
		}
	}
}

// Several processes × goroutines on one key: the helper process runs when
// the test binary is started with this variable set.
const helperEnv = "SLUICE_MEMCACHED_HELPER"

var atomicPolicies = [][]sluice.Limit{
	{{Rate: 100, Period: time.Hour, Algorithm: sluice.FixedWindow}},
	{{Rate: 100, Period: time.Hour, Algorithm: sluice.SlidingWindow}},
	{{Rate: 100, Period: time.Hour, Algorithm: sluice.ApproxSlidingWindow, Buckets: 4}},
	{{Rate: 100, Period: time.Hour}},
	{{Rate: 100, Period: time.Hour, Algorithm: sluice.SlidingLog}},
	{
		{Rate: 100, Period: time.Hour},
		{Rate: 60, Period: time.Hour, Algorithm: sluice.FixedWindow},
		{Rate: 80, Period: time.Hour, Algorithm: sluice.SlidingLog},
	},
}

const (
	processes          = 4
	goroutinesEach     = 16
	takesEachGoroutine = 40
)

// TestHelperProcess is not a test: it is the body of the processes that
// TestAtomicAcrossProcesses starts.
func TestHelperProcess(t *testing.T) {
	cfg := os.Getenv(helperEnv)
	if cfg == "" {
		return // run only as a helper process, as in os/exec's tests
	}
	addr, prefix, _ := strings.Cut(cfg, " ")
	s := newStore(t, Config{Addrs: []string{addr}})
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	for i, limits := range atomicPolicies {
		r := sluice.Request{Prefix: prefix, Key: strconv.Itoa(i), Limits: limits, Cost: 1, Now: t0}
		var admitted, failed atomic.Int64
		var wg sync.WaitGroup
		for range goroutinesEach {
			wg.Go(func() {
				for range takesEachGoroutine {
					d, err := s.Decide(context.Background(), r)
					switch {
					case err != nil:
						failed.Add(1)
					case d.Allowed:
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		fmt.Printf("result %d %d %d\n", i, admitted.Load(), failed.Load())
	}
}

// TestAtomicAcrossProcesses runs 4 processes × 16 goroutines × 40 takes
// on one key per policy, at one instant: admitted must be the limit
// exactly, for counters (atomic increments), for GCRA and sliding log
// (compare-and-set across processes) and for a mixed policy.
func TestAtomicAcrossProcesses(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		return
	}
	srv := testserver.StartMemcached(t)
	prefix := uniquePrefix(t)
	var outs []*bufio.Scanner
	var ins []io.WriteCloser
	var cmds []*exec.Cmd
	for range processes {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v")
		cmd.Env = append(os.Environ(), helperEnv+"="+srv.Addr+" "+prefix)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		sc := bufio.NewScanner(stdout)
		for sc.Scan() && sc.Text() != "ready" {
		}
		outs = append(outs, sc)
		ins = append(ins, stdin)
		cmds = append(cmds, cmd)
	}
	for _, in := range ins {
		fmt.Fprintln(in) // all start together
	}
	admitted := make([]int, len(atomicPolicies))
	for p, sc := range outs {
		for sc.Scan() {
			var i, a, f int
			if n, _ := fmt.Sscanf(sc.Text(), "result %d %d %d", &i, &a, &f); n != 3 {
				continue
			}
			if f != 0 {
				t.Errorf("process %d, policy %d: %d takes failed", p, i, f)
			}
			admitted[i] += a
		}
		if err := cmds[p].Wait(); err != nil {
			t.Errorf("helper process %d: %v", p, err)
		}
	}
	for i, limits := range atomicPolicies {
		want := limits[0].MaxBurst()
		for _, l := range limits {
			want = min(want, l.MaxBurst())
		}
		if admitted[i] != want {
			t.Errorf("%s: %d processes × %d goroutines × %d takes admitted %d, want exactly %d",
				policyName(limits), processes, goroutinesEach, takesEachGoroutine, admitted[i], want)
		}
	}
}

func policyName(limits []sluice.Limit) string {
	names := make([]string, len(limits))
	for i, l := range limits {
		names[i] = strings.NewReplacer("/", "per", " ", "_").Replace(l.String())
	}
	return strings.Join(names, "+")
}

// TestReservation runs sluice.Limiter's Reserve, Commit and Refund on the
// store: a refunded reservation gives its units back, a committed one
// keeps them, for a counter policy and a compare-and-set one.
func TestReservation(t *testing.T) {
	s := newStore(t, Config{Addrs: []string{testserver.StartMemcached(t).Addr}})
	ctx := context.Background()
	for _, limits := range [][]sluice.Limit{
		{{Rate: 3, Period: time.Hour, Algorithm: sluice.SlidingWindow}, {Rate: 5, Period: 24 * time.Hour, Algorithm: sluice.FixedWindow}},
		{{Rate: 3, Period: time.Hour}, {Rate: 5, Period: time.Hour, Algorithm: sluice.SlidingLog}},
	} {
		t.Run(policyName(limits), func(t *testing.T) {
			lim, err := sluice.New(s, sluice.Config{Limits: limits, Namespace: uniquePrefix(t)})
			if err != nil {
				t.Fatal(err)
			}
			wrong, err := lim.Reserve(ctx, "alice", 1) // a failed login: it counts
			if err != nil || !wrong.Allowed {
				t.Fatalf("Reserve = %v, %v", wrong.Allowed, err)
			}
			if err := wrong.Commit(); err != nil {
				t.Fatal(err)
			}
			right, err := lim.Reserve(ctx, "alice", 1) // a good login: refunded
			if err != nil || !right.Allowed {
				t.Fatalf("Reserve = %v, %v", right.Allowed, err)
			}
			if err := right.Refund(ctx); err != nil {
				t.Fatal(err)
			}
			if err := right.Refund(ctx); !errors.Is(err, sluice.ErrReservationDone) {
				t.Errorf("second Refund = %v, want ErrReservationDone", err)
			}
			d, err := lim.Peek(ctx, "alice")
			if err != nil || d.Remaining != 1 {
				t.Errorf("Peek after one committed and one refunded reservation: Remaining %d, %v; want 1 (3 less the committed, less the peek's own)", d.Remaining, err)
			}
		})
	}
}
