// Command ratio reads Go benchmark output and prints, in Markdown, the
// ratio of the medians of sluice and each peer in every scenario, then the
// median and spread of every implementation, one table per unit.
//
// Benchmarks name their implementation with an impl=NAME element and the
// scenario with the others (see package bench); implementations whose
// name starts with the -ours prefix are sluice's, the rest are peers;
// peers whose name starts with the -floor prefix are floors (the least
// the work can cost, built only to measure), shown beside the peers but
// never taken as the fastest peer.
// Medians and their spreads are benchstat's: the median of the samples
// and its 95% confidence interval, as the largest distance from the
// median in percent.
//
// Usage:
//
//	ratio [-ours sluice] [-floor floor] [-units ns/op,B/key] file...
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

	"github.com/sluicehq/sluice/bench/internal/results"
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
	floor := fs.String("floor", "floor", "name prefix of the floors: compared with, never the fastest peer")
	units := fs.String("units", "ns/op,B/key", "comma-separated units to compute ratios for")
	admitted := fs.String("admitted", results.Admitted, "unit telling how much an implementation admitted; peers that differ from ours are marked")
	if err := fs.Parse(args); err != nil {
		return err
	}
	t := results.New()
	if fs.NArg() == 0 {
		if err := t.Read(stdin, "stdin"); err != nil {
			return err
		}
	}
	for _, name := range fs.Args() {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		err = t.Read(f, name)
		f.Close()
		if err != nil {
			return err
		}
	}
	if len(t.Scenarios) == 0 {
		return fmt.Errorf("no benchmark results with an impl= element")
	}
	// Ours first, then the peers, each in the order they ran.
	slices.SortStableFunc(t.Impls, func(a, b string) int {
		return cmpBool(!strings.HasPrefix(a, *ours), !strings.HasPrefix(b, *ours))
	})
	w := bufio.NewWriter(stdout)
	for _, unit := range strings.Split(*units, ",") {
		writeRatios(w, t, unit, *ours, *floor, *admitted)
	}
	for _, unit := range t.Units {
		writeMedians(w, t, unit)
	}
	writeOthers(w, t)
	return w.Flush()
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

// writeRatios prints, for every scenario and each of our implementations
// in it, our median, the fastest (smallest) peer's among those that
// admitted as much as ours, their ratio, and the ratio to every peer. A
// ratio to a peer that admitted a different amount is marked with "†":
// it did not do the same work. A floor is never the fastest peer.
func writeRatios(w io.Writer, t *results.Table, unit, ours, floor, admitted string) {
	var mine, peers []string
	for _, impl := range t.Impls {
		if strings.HasPrefix(impl, ours) {
			mine = append(mine, impl)
		} else {
			peers = append(peers, impl)
		}
	}
	var rows [][]string
	for _, sc := range t.Scenarios {
		for _, m := range mine {
			ms := t.Summary(key(sc, m, unit))
			if !ms.OK || ms.Median == 0 {
				continue
			}
			row := []string{sc, m, ms.String(), "", "", ""}
			best := math.Inf(1)
			for _, p := range peers {
				ps := t.Summary(key(sc, p, unit))
				if !ps.OK || ps.Median == 0 {
					row = append(row, "")
					continue
				}
				cell := fmt.Sprintf("%.2f", ms.Median/ps.Median)
				same := results.SameWork(t.Summary(key(sc, m, admitted)), t.Summary(key(sc, p, admitted)))
				if !same {
					cell += "†"
				}
				if same && ps.Median < best && !strings.HasPrefix(p, floor) {
					best = ps.Median
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

// writeMedians prints the median ± spread of every implementation in
// every scenario that reports unit.
func writeMedians(w io.Writer, t *results.Table, unit string) {
	var rows [][]string
	for _, sc := range t.Scenarios {
		row := []string{sc}
		any := false
		for _, impl := range t.Impls {
			s := t.Summary(key(sc, impl, unit))
			any = any || s.OK
			row = append(row, s.String())
		}
		if any {
			rows = append(rows, row)
		}
	}
	fmt.Fprintf(w, "\n### %s: median ±95%% confidence interval\n\n", unit)
	writeTable(w, append([]string{"scenario"}, t.Impls...), rows)
}

// writeOthers prints the ns/op of the benchmarks that name no
// implementation, such as the cost of reading the clock.
func writeOthers(w io.Writer, t *results.Table) {
	var rows [][]string
	for _, name := range t.Others {
		if s := t.Summary(key(name, "", "ns/op")); s.OK {
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

// key returns the key of one scenario, implementation and unit.
func key(scenario, impl, unit string) results.Key {
	return results.Key{Scenario: scenario, Impl: impl, Unit: unit}
}
