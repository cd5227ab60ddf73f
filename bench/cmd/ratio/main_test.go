package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRun checks the ratio table on a small benchmark output: medians of
// three samples, the fastest peer that admitted as much as sluice (a
// floor, faster still, is not a peer), and the mark on a peer that
// admitted less.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"testdata/raw.txt"}, nil, &out); err != nil {
		t.Fatalf("run(testdata/raw.txt) = %v", err)
	}
	got := out.String()
	for _, want := range []string{
		// sluice 42 ns against x-time-rate 84 ns; sethvargo is faster but
		// admitted 1 in 100, so it is not the fastest like peer.
		"| Memory/keys=hot/traffic=admit/run=serial | sluice-gcra | 42 ±",
		"| x-time-rate | 84 ±∞ |",
		"| 0.50 | 0.50 | 2.00† | 1.40 |",
		// Bytes per key: 30 against 120.
		"| MemoryBytes/keys=1M | sluice-gcra | 30 ±∞ | x-time-rate | 120 ±∞ | 0.25 | 0.25 |",
		// The admitted/op medians, ours first.
		"| scenario | sluice-gcra | x-time-rate | sethvargo |",
		"| Memory/keys=hot/traffic=admit/run=serial | 1 ±∞ | 1 ±∞ | 0.011 ±∞ |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("run output lacks %q; got:\n%s", want, got)
		}
	}
	// BenchmarkClock names no impl: it is listed apart, not compared.
	if n := strings.Count(got, "Clock"); n != 1 || !strings.Contains(got, "| Clock/time.Now | 50 ±∞ |") {
		t.Errorf("run output lists Clock %d times, want once in the other benchmarks; got:\n%s", n, got)
	}
}

func TestRunNoResults(t *testing.T) {
	var out bytes.Buffer
	err := run(nil, strings.NewReader("PASS\n"), &out)
	if err == nil {
		t.Fatalf("run(no results) = nil, want an error")
	}
}
