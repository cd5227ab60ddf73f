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

// TestOfSelf checks Of, and its reading of /proc/<pid>/stat, against
// Self on this process: within the 10 ms resolution of the latter (and
// the threads of the test binary that ended, which only Self counts),
// and an error for a process that is not there.
func TestOfSelf(t *testing.T) {
	for name, of := range map[string]func(int) (time.Duration, error){"Of": Of, "stat": stat} {
		got, err := of(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if self := Self(); got > self+time.Millisecond || self-got > 50*time.Millisecond {
			t.Errorf("%s(self) = %v, Self() = %v: want within the resolution", name, got, self)
		}
	}
	if _, err := Of(-1); err == nil {
		t.Error("Of(-1) = nil error, want one")
	}
}
