// Command ratio reads Go benchmark output and prints, in Markdown, the
// ratio of the medians of sluice and each peer in every scenario, then the
// median and spread of every implementation, one table per unit.
//
// Benchmarks name their implementation with an impl=NAME element and the
// scenario with the others (see package bench); implementations whose
// name starts with the -ours prefix are sluice's, the rest are peers.
// Medians and their spreads are benchstat's: the median of the samples
// and its 95% confidence interval, as the largest distance from the
// median in percent.
//
// Usage:
//
//	ratio [-ours sluice] [-units ns/op,B/key] file...
//
// With no file it reads standard input.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ratio:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("ratio", flag.ContinueOnError)
	ours := fs.String("ours", "sluice", "name prefix of the implementations compared with the others")
	units := fs.String("units", "ns/op,B/key", "comma-separated units to compute ratios for")
	admitted := fs.String("admitted", "admitted/op", "unit telling how much an implementation admitted; peers that differ from ours are marked")
	if err := fs.Parse(args); err != nil {
		return err
	}
	t := newTable()
	if fs.NArg() == 0 {
		if err := t.read(stdin, "stdin"); err != nil {
			return err
		}
	}
	for _, name := range fs.Args() {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		err = t.read(f, name)
		f.Close()
		if err != nil {
			return err
		}
	}
	if len(t.scenarios) == 0 {
		return fmt.Errorf("no benchmark results with an impl= element")
	}
	// Ours first, then the peers, each in the order they ran.
	slices.SortStableFunc(t.impls, func(a, b string) int {
		return cmpBool(!strings.HasPrefix(a, *ours), !strings.HasPrefix(b, *ours))
	})
	w := bufio.NewWriter(stdout)
	for _, unit := range strings.Split(*units, ",") {
		t.writeRatios(w, unit, *ours, *admitted)
	}
	for _, unit := range t.units {
		t.writeMedians(w, unit)
	}
	t.writeOthers(w)
	return w.Flush()
}

// key identifies one sample: a scenario, an implementation and a unit.
type key struct{ scenario, impl, unit string }

// table collects samples in the order benchmarks first appear. Benchmarks
// without an impl= element (the clock, say) are kept apart, as others.
type table struct {
	scenarios, impls, units, others []string
	samples                         map[key][]float64
}

func newTable() *table { return &table{samples: map[key][]float64{}} }

// read adds the results of one benchmark output. Values keep the unit
// the benchmark printed (ns/op rather than benchfmt's sec/op).
func (t *table) read(r io.Reader, name string) error {
	br := benchfmt.NewReader(r, name)
	for br.Scan() {
		res, ok := br.Result().(*benchfmt.Result)
		if !ok {
			continue // syntax errors are other output: test logs, PASS
		}
		scenario, impl := split(res.Name)
		for _, v := range res.Values {
			unit, val := v.Unit, v.Value
			if v.OrigUnit != "" {
				unit, val = v.OrigUnit, v.OrigValue
			}
			k := key{scenario, impl, unit}
			if _, seen := t.samples[k]; !seen {
				if impl == "" {
					t.others = appendNew(t.others, scenario)
				} else {
					t.scenarios = appendNew(t.scenarios, scenario)
					t.impls = appendNew(t.impls, impl)
					t.units = appendNew(t.units, unit)
				}
			}
			t.samples[k] = append(t.samples[k], val)
		}
	}
	return br.Err()
}

// split returns the scenario, the name without its impl= element and
// GOMAXPROCS suffix, and the implementation.
func split(n benchfmt.Name) (scenario, impl string) {
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

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// summary is the median of a sample and its spread.
type summary struct {
	median float64
	spread string
	ok     bool
}

func (t *table) summary(k key) summary {
	vals := t.samples[k]
	if len(vals) == 0 {
		return summary{}
	}
	s := benchmath.AssumeNothing.Summary(benchmath.NewSample(slices.Clone(vals), &benchmath.DefaultThresholds), 0.95)
	return summary{median: s.Center, spread: s.PctRangeString(), ok: true}
}

func (s summary) String() string {
	if !s.ok {
		return ""
	}
	return format(s.median) + " ±" + s.spread
}

func format(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// writeRatios prints, for every scenario and each of our implementations
// in it, our median, the fastest (smallest) peer's among those that
// admitted as much as ours, their ratio, and the ratio to every peer. A
// ratio to a peer that admitted a different amount is marked with "†":
// it did not do the same work.
func (t *table) writeRatios(w io.Writer, unit, ours, admitted string) {
	var mine, peers []string
	for _, impl := range t.impls {
		if strings.HasPrefix(impl, ours) {
			mine = append(mine, impl)
		} else {
			peers = append(peers, impl)
		}
	}
	var rows [][]string
	for _, sc := range t.scenarios {
		for _, m := range mine {
			ms := t.summary(key{sc, m, unit})
			if !ms.ok || ms.median == 0 {
				continue
			}
			row := []string{sc, m, ms.String(), "", "", ""}
			best := math.Inf(1)
			for _, p := range peers {
				ps := t.summary(key{sc, p, unit})
				if !ps.ok || ps.median == 0 {
					row = append(row, "")
					continue
				}
				cell := fmt.Sprintf("%.2f", ms.median/ps.median)
				same := sameWork(t.summary(key{sc, m, admitted}), t.summary(key{sc, p, admitted}))
				if !same {
					cell += "†"
				}
				if same && ps.median < best {
					best = ps.median
					row[3], row[4], row[5] = p, ps.String(), cell
				}
				row = append(row, cell)
			}
			if len(row) > 6 {
				rows = append(rows, row)
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### %s: ratio of medians %s/peer (below 1: %s is smaller; † admitted a different amount)\n\n", unit, ours, ours)
	header := append([]string{"scenario", ours, unit, "fastest like peer", unit, "ratio"}, peers...)
	writeTable(w, header, rows)
}

// sameWork reports whether two admitted/op summaries agree: within 5%, or
// both below 1 in 1000 (deny-heavy runs admit a few requests as time
// refills). Without the metric, it assumes they do.
func sameWork(a, b summary) bool {
	if !a.ok || !b.ok {
		return true
	}
	d := math.Abs(a.median - b.median)
	return d <= 0.001 || d <= 0.05*math.Max(a.median, b.median)
}

// writeMedians prints the median ± spread of every implementation in
// every scenario that reports unit.
func (t *table) writeMedians(w io.Writer, unit string) {
	var rows [][]string
	for _, sc := range t.scenarios {
		row := []string{sc}
		any := false
		for _, impl := range t.impls {
			s := t.summary(key{sc, impl, unit})
			any = any || s.ok
			row = append(row, s.String())
		}
		if any {
			rows = append(rows, row)
		}
	}
	fmt.Fprintf(w, "\n### %s: median ±95%% confidence interval\n\n", unit)
	writeTable(w, append([]string{"scenario"}, t.impls...), rows)
}

// writeOthers prints the ns/op of the benchmarks that name no
// implementation, such as the cost of reading the clock.
func (t *table) writeOthers(w io.Writer) {
	var rows [][]string
	for _, name := range t.others {
		if s := t.summary(key{name, "", "ns/op"}); s.ok {
			rows = append(rows, []string{name, s.String()})
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### other benchmarks: median ±95%% confidence interval\n\n")
	writeTable(w, []string{"benchmark", "ns/op"}, rows)
}

func writeTable(w io.Writer, header []string, rows [][]string) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(header, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat(" --- |", len(header)))
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
}
