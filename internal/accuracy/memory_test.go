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

// TestEviction measures a memory store at its cap. Attackers are never
// forgotten while over their limit, so their rows meet every stated
// bound, but for the fixed window's one-unit tie (see RunEviction); a
// crowd that does not fit is forgotten part way, and only reported.
func TestEviction(t *testing.T) {
	rs, err := RunEviction(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	logTable(t, rs)
	if want := 2 * len(Limits()); len(rs) != want {
		t.Fatalf("RunEviction returned %d results, want %d", len(rs), want)
	}
	for _, r := range rs {
		if r.Admitted == 0 || r.Requests == 0 {
			t.Errorf("%v on %s: admitted %d/%d, want some", r.Limit, r.Trace, r.Admitted, r.Requests)
		}
		if !strings.HasPrefix(r.Trace, "evict-attack") {
			continue
		}
		if r.Full != 0 {
			t.Errorf("%v on %s: %d takes failed with ErrStoreFull, want 0 (light users leave room)", r.Limit, r.Trace, r.Full)
		}
		if r.Limit.Algorithm != sluice.FixedWindow {
			if err := r.Check(); err != nil {
				t.Error(err)
			}
			continue
		}
		// Each unit given back can add one to a window, and no more.
		if r.MaxInWindow > r.Bound+r.Over {
			t.Errorf("%v on %s: max in window = %d, want at most %d + %d given back", r.Limit, r.Trace, r.MaxInWindow, r.Bound, r.Over)
		}
		if r.Over > 0 {
			t.Logf("%v on %s: %d units given back to attackers by evictions on a tie", r.Limit, r.Trace, r.Over)
		}
	}
}
