package cputime

import (
	"testing"
	"time"
)

// TestSelfGrows checks that Self counts CPU the process spends: a bounded
// loop of work moves it forward, and never back.
func TestSelfGrows(t *testing.T) {
	before := Self()
	deadline := time.Now().Add(2 * time.Second)
	x := uint64(1)
	for Self() <= before && time.Now().Before(deadline) {
		for range 1_000_000 {
			x = x*6364136223846793005 + 1
		}
	}
	if after := Self(); after <= before {
		t.Errorf("Self() = %v after work, want more than %v (x=%d)", after, before, x)
	}
}
