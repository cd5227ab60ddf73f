// Package cputime holds benchmark helpers that report CPU time per
// operation (package internal/cputime reads it).
package cputime

import (
	"testing"

	"github.com/sluicehq/sluice/internal/cputime"
)

// Loop runs do(i) for i = 0, 1, … while b.Loop asks, each i below n
// (do(i % n)), and reports the allocations and the process's CPU time
// per call (cpu-ns/op); the first error fails the benchmark.
func Loop(b *testing.B, n int, do func(i int) error) {
	b.ReportAllocs()
	cpu := cputime.Self()
	i := 0
	for b.Loop() {
		if err := do(i % n); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(cputime.Self()-cpu)/float64(b.N), "cpu-ns/op")
}
