package cputime

import (
	"os"
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

// TestOfSelf checks Of against Self on this process: within the 10 ms
// resolution of /proc, and an error for a process that is not there.
func TestOfSelf(t *testing.T) {
	got, err := Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self := Self(); got > self || self-got > 50*time.Millisecond {
		t.Errorf("Of(self) = %v, Self() = %v: want within the resolution", got, self)
	}
	if _, err := Of(-1); err == nil {
		t.Error("Of(-1) = nil error, want one")
	}
}
