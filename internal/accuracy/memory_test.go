package accuracy

import (
	"context"
	"strings"
	"testing"

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

// TestEviction measures the memory store at its cap on the first case of
// EvictionCases, with limits of 10 per minute.
func TestEviction(t *testing.T) {
	rs, err := RunEviction(context.Background(), EvictionLimits(10), EvictionCases()[:1], 1)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteEvictionTable(&b, rs); err != nil {
		t.Fatal(err)
	}
	t.Log("the memory store at its cap, 10/min:\n" + b.String())
}
