package storetest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// brokenStore is modelStore with one deliberate bug, named by flaw.
type brokenStore struct {
	flaw string
	mu   sync.Mutex
	ref  reference
}

func (m *brokenStore) Decide(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
	if err := r.Validate(); err != nil {
		return sluice.Decision{}, err
	}
	if r.Now.IsZero() {
		r.Now = time.Now()
	}
	switch m.flaw {
	case "noprefix":
		r.Prefix = ""
	case "racy": // check, unlock, then commit: a read-then-write race
		if r.Op != sluice.OpTake {
			break
		}
		m.mu.Lock()
		peek := r
		peek.Op = sluice.OpPeek
		d := m.ref.apply(peek)
		m.mu.Unlock()
		d.Time = r.Now
		if !d.Allowed {
			return d, nil
		}
		time.Sleep(time.Microsecond)
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, l := range r.Limits {
			st := m.ref.states[stateKey{r.Prefix + r.Key, l.StateID()}]
			algorithm.Commit(l, st, r.Now.UnixNano()-algorithm.Offset(l, r.Prefix+r.Key), r.Cost)
		}
		return d, nil
	case "greedy": // each limit decided alone: a denied take consumes on the others
		if r.Op == sluice.OpTake && len(r.Limits) > 1 {
			m.mu.Lock()
			defer m.mu.Unlock()
			var d sluice.Decision
			for i, l := range r.Limits {
				one := r
				one.Limits = []sluice.Limit{l}
				di := m.ref.apply(one)
				if i == 0 || di.Binds(d) {
					d = di
				}
			}
			return d, nil
		}
	case "keyoffset": // staggered offset from Key alone, not Prefix+Key
		for _, l := range r.Limits {
			if l.Staggered && algorithm.Offset(l, r.Key) != algorithm.Offset(l, r.Prefix+r.Key) {
				r.Now = r.Now.Add(time.Duration(algorithm.Offset(l, r.Prefix+r.Key) - algorithm.Offset(l, r.Key)))
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.ref.apply(r)
	d.Time = r.Now
	switch {
	case m.flaw == "clocktime":
		d.Time = time.Now()
	case m.flaw == "blankanswer" && (r.Op == sluice.OpRefund || r.Op == sluice.OpReset):
		// what store/redis once answered: allowed, nothing more
		d = sluice.Decision{Allowed: true, Limit: d.Limit, Time: d.Time}
	}
	return d, nil
}

// DecideBatch decides rs one after another, except for flaw "batchorder":
// last to first.
func (m *brokenStore) DecideBatch(ctx context.Context, rs []sluice.Request) ([]sluice.Decision, []error) {
	ds, errs := make([]sluice.Decision, len(rs)), make([]error, len(rs))
	for j := range rs {
		i := j
		if m.flaw == "batchorder" {
			i = len(rs) - 1 - j
		}
		ds[i], errs[i] = m.Decide(ctx, rs[i])
	}
	return ds, errs
}

// TestBrokenHelper runs the suite on a broken store when the parent test
// asks for it (RunBatch for the flaws of batches); otherwise it does
// nothing.
func TestBrokenHelper(t *testing.T) {
	flaw := os.Getenv("STORETEST_FLAW")
	if flaw == "" {
		return
	}
	newStore := func(t *testing.T) *brokenStore {
		return &brokenStore{flaw: flaw, ref: reference{states: map[stateKey][]int64{}}}
	}
	if strings.HasPrefix(flaw, "batch") {
		RunBatch(t, func(t *testing.T) BatchStore { return newStore(t) })
		return
	}
	Run(t, func(t *testing.T) sluice.Store { return newStore(t) })
}

// TestRunCatchesBrokenStores checks that the suite fails each broken
// store, in the subtest that should catch its flaw.
func TestRunCatchesBrokenStores(t *testing.T) {
	for _, c := range []struct{ flaw, caughtBy string }{
		{"noprefix", "Keys"},
		{"racy", "Concurrency"},
		{"greedy", "Policy"},
		{"keyoffset", "Differential"},
		{"clocktime", "Differential"},
		{"blankanswer", "Answers"},
		{"batchorder", "Batches"},
	} {
		t.Run(c.flaw, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "STORETEST_FLAW="+c.flaw)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a store with flaw %q", c.flaw)
			}
			if want := "--- FAIL: TestBrokenHelper/" + c.caughtBy; !strings.Contains(string(out), want) {
				t.Errorf("flaw %q: output lacks %q:\n%s", c.flaw, want, out)
			}
		})
	}
}
