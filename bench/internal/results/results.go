// Package results reads the output of sluice's comparative benchmarks into
// a table of samples, keyed by scenario, implementation and unit, and
// summarises each sample as benchstat does.
//
// A comparative benchmark names its implementation in one element
// impl=NAME and its scenario in the others (see package bench): the
// scenario of BenchmarkMemory/keys=hot/impl=x-time-rate/run=serial-2 is
// Memory/keys=hot/run=serial. The commands bench/cmd/ratio and
// bench/cmd/charts share this reading, so that a chart and a ratio table
// made from the same file agree.
package results

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

// Key identifies the samples of one scenario, implementation and unit.
// Benchmarks that name no implementation have an empty Impl.
type Key struct{ Scenario, Impl, Unit string }

// Table collects samples, and the scenarios, implementations and units
// they belong to in the order they first appear. Benchmarks without an
// impl= element (the clock, say) are listed apart, in Others.
//
// Make one with [New]; the zero value has no room for samples. A Table is
// not safe for concurrent use.
type Table struct {
	Scenarios, Impls, Units, Others []string

	samples map[Key][]float64
}

// New returns an empty table.
func New() *Table { return &Table{samples: map[Key][]float64{}} }

// Add appends one sample of k, and lists k's scenario, implementation and
// unit (or, without an implementation, its scenario in Others) the first
// time it sees them.
func (t *Table) Add(k Key, v float64) {
	if _, seen := t.samples[k]; !seen {
		if k.Impl == "" {
			t.Others = appendNew(t.Others, k.Scenario)
		} else {
			t.Scenarios = appendNew(t.Scenarios, k.Scenario)
			t.Impls = appendNew(t.Impls, k.Impl)
			t.Units = appendNew(t.Units, k.Unit)
		}
	}
	t.samples[k] = append(t.samples[k], v)
}

// Len returns the number of samples of k.
func (t *Table) Len(k Key) int { return len(t.samples[k]) }

// Read adds the results of one raw Go benchmark output, named name in
// errors. Values keep the unit the benchmark printed (ns/op rather than
// benchfmt's sec/op). Lines that are not results (test logs, PASS, tables)
// are skipped.
func (t *Table) Read(r io.Reader, name string) error {
	br := benchfmt.NewReader(r, name)
	for br.Scan() {
		res, ok := br.Result().(*benchfmt.Result)
		if !ok {
			continue // syntax errors are other output
		}
		scenario, impl := Split(res.Name)
		for _, v := range res.Values {
			unit, val := v.Unit, v.Value
			if v.OrigUnit != "" {
				unit, val = v.OrigUnit, v.OrigValue
			}
			t.Add(Key{scenario, impl, unit}, val)
		}
	}
	return br.Err()
}

// Split returns the scenario, the benchmark's name without "Benchmark",
// its impl= element and its GOMAXPROCS suffix, and the implementation.
func Split(n benchfmt.Name) (scenario, impl string) {
	base, parts := n.Parts()
	var b strings.Builder
	b.WriteString(strings.TrimPrefix(string(base), "Benchmark"))
	for _, p := range parts {
		s := string(p)
		switch {
		case strings.HasPrefix(s, "/impl="):
			impl = strings.TrimPrefix(s, "/impl=")
		case strings.HasPrefix(s, "-"): // GOMAXPROCS
		default:
			b.WriteString(s)
		}
	}
	return b.String(), impl
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// Admitted is the unit in which comparative benchmarks report how much
// they admitted.
const Admitted = "admitted/op"

// SameWork reports whether two admitted/op summaries agree: within 5%, or
// both below 1 in 1000 (deny-heavy runs admit a few requests as time
// refills). Without the metric, it assumes they do. Implementations that
// disagree did not do the same work, and comparing their speed says
// little.
func SameWork(a, b Summary) bool {
	if !a.OK || !b.OK {
		return true
	}
	d := math.Abs(a.Median - b.Median)
	return d <= 0.001 || d <= 0.05*math.Max(a.Median, b.Median)
}

// Summary is the median of a sample and its spread: benchstat's 95%
// confidence interval of the median, as the largest distance from the
// median in percent. OK is false when there was no sample.
type Summary struct {
	Median float64
	Spread string
	OK     bool
}

// Summary returns the summary of the samples of k.
func (t *Table) Summary(k Key) Summary {
	vals := t.samples[k]
	if len(vals) == 0 {
		return Summary{}
	}
	s := benchmath.AssumeNothing.Summary(benchmath.NewSample(slices.Clone(vals), &benchmath.DefaultThresholds), 0.95)
	return Summary{Median: s.Center, Spread: s.PctRangeString(), OK: true}
}

// String returns the median and spread as "65.5 ±8%", or "" without a
// sample.
func (s Summary) String() string {
	if !s.OK {
		return ""
	}
	return Format(s.Median) + " ±" + s.Spread
}

// Format returns v with three significant digits, or as an integer from
// 100 up.
func Format(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
