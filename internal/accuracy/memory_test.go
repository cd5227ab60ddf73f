package accuracy

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

// TestMemoryMatchesAlgorithm runs the report's traces through the memory
// store, under its cap: every figure must be the same as the algorithms'
// applied directly, decision for decision.
func TestMemoryMatchesAlgorithm(t *testing.T) {
	want := directResults(t)
	got, err := Run(context.Background(), Memory(memory.Config{SweepInterval: -1}), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("Run(memory) returned %d results, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("Run(memory)[%d] = %+v, want %+v (as applied directly)", i, got[i], want[i])
		}
	}
}

// TestEviction measures the memory store at its cap on the cases of
// EvictionCases but the one at ten times the rate (the report's), with
// limits of 2 per minute, so that 10,000 actors take seconds under the
// race detector. Forgetting an actor must never hand back what it spent:
// no take the algorithm with unbounded memory would deny, no unit over
// the stated bound, no error. The store errs the other way, and the test
// holds it to what was measured (seed 1, three runs; the eviction sample
// starts at a random place): of what the algorithm alone admits, the
// store admitted at least 95% with a crowd twice its room (it remembers
// the actors it evicted, each apart: issue 31 asks 90%), 16% with a crowd
// twenty times its room (it holds 500 of 10,000 actors and remembers a
// few hundred more; the others share the ledger's cells, and are charged
// as the most spent of those), and 84% to attackers among light users.
func TestEviction(t *testing.T) {
	all := EvictionCases()
	cases := []EvictionCase{all[0], all[1], all[3]} // all[2], at 10x, is the report's
	// The least share of the algorithm's admissions the store must admit,
	// per case: below what was measured, for the runs' spread.
	floor := map[string]float64{
		cases[0].String(): 0.90,
		cases[1].String(): 0.14,
		cases[2].String(): 0.78,
	}
	for _, l := range EvictionLimits(2) {
		t.Run(Label(l), func(t *testing.T) {
			t.Parallel()
			rs, err := RunEviction(context.Background(), []sluice.Limit{l}, cases, 1)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			if err := WriteEvictionTable(&b, rs); err != nil {
				t.Fatal(err)
			}
			t.Log("the memory store at its cap:\n" + b.String())
			if len(rs) != len(cases) {
				t.Fatalf("RunEviction returned %d results, want %d", len(rs), len(cases))
			}
			for _, r := range rs {
				if r.OverExact != 0 || r.OverBound != 0 || r.Full != 0 {
					t.Errorf("%s: %d takes over-admitted, %d units over the bound %d (max %d in a window), %d failed; want 0, 0, 0",
						r.Trace, r.OverExact, r.OverBound, r.Bound, r.MaxInWindow, r.Full)
				}
				if got := float64(r.Admitted) / float64(r.Exact); got < floor[r.Trace] {
					t.Errorf("%s: admitted %d, %.1f%% of the algorithm's %d; want at least %.0f%%",
						r.Trace, r.Admitted, 100*got, r.Exact, 100*floor[r.Trace])
				}
			}
		})
	}
}
