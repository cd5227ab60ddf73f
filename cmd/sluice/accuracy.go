package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/internal/accuracy"
	"github.com/sluicehq/sluice/store/memory"
)

// evictionRate is the rate per minute of the limits of the eviction
// table: low enough that its crowd of 10,000 actors is measured in
// seconds.
const evictionRate = 10

const accuracyHelp = `usage: sluice accuracy [-seed N] [-format text|markdown] [-store direct|memory] [-flood]

Measures every algorithm against a brute-force oracle on adversarial
traces, and fails if one admits beyond its stated bound. With -store
memory, the algorithms run through the memory store, and a second table
holds the store at its cap (eviction) to the same bounds. With -flood,
it also floods memory stores of 1 MiB to 256 MiB with distinct keys of
one rule and tells how many keys it takes before 1% of that rule's fresh
actors are refused, and how many of another rule's are (minutes, and
256 MiB of memory).

Example:

  sluice accuracy -format markdown -store memory -flood
`

// runAccuracy implements "sluice accuracy": it replays the adversarial
// traces of package internal/accuracy through every algorithm, judges each
// decision with a brute-force oracle, prints the table (algorithm, trace,
// admitted, max in any window, limit, stated bound, over- and
// under-admitted, windows over the bound) and fails if any algorithm
// breaks its stated bound. With -store memory, the traces go through the
// memory store instead, followed by a second table of the memory store at
// its cap (eviction), also held to the bounds: no take admitted that the
// algorithm with unbounded memory would deny, no unit over the stated
// bound.
func runAccuracy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("accuracy", flag.ContinueOnError)
	seed := fs.Uint64("seed", 1, "seed of the random traces (the same seed gives the same table)")
	format := fs.String("format", "text", "table format: text or markdown")
	store := fs.String("store", "direct", "where the algorithms run: direct (package algorithm on states in a map) or memory (store/memory, plus its eviction at a small cap)")
	flood := fs.Bool("flood", false, "also flood memory stores with distinct keys of one rule and measure what their fresh actors, and another rule's, pay")
	pos, err := parseFlags(fs, accuracyHelp, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError(fmt.Sprintf("accuracy: unexpected argument %q", pos[0]))
	}
	write, writeEviction, writeFlood := accuracy.WriteTable, accuracy.WriteEvictionTable, accuracy.WriteFloodTable
	switch *format {
	case "text":
	case "markdown", "md":
		write, writeEviction, writeFlood = accuracy.WriteMarkdown, accuracy.WriteEvictionMarkdown, accuracy.WriteFloodMarkdown
	default:
		return fmt.Errorf("accuracy: unknown format %q (want text or markdown)", *format)
	}
	newStore, via := accuracy.Direct, "algorithms applied directly"
	switch *store {
	case "direct":
	case "memory":
		newStore, via = accuracy.Memory(memory.Config{SweepInterval: -1}), "through the memory store"
	default:
		return fmt.Errorf("accuracy: unknown store %q (want direct or memory)", *store)
	}
	var broken []error
	results, err := accuracy.Run(ctx, newStore, *seed)
	if err != nil {
		return fmt.Errorf("accuracy: %w", err)
	}
	fmt.Fprintf(stdout, "Accuracy of 100/min per actor on adversarial traces (seed %d), %s.\n\n", *seed, via)
	if err := write(stdout, results); err != nil {
		return err
	}
	if *store == "memory" {
		if broken, err = runEviction(ctx, stdout, writeEviction, *seed); err != nil {
			return err
		}
	}
	if *flood {
		rs, err := accuracy.RunFlood(ctx, accuracy.FloodCases())
		if err != nil {
			return fmt.Errorf("accuracy: %w", err)
		}
		fmt.Fprintf(stdout, "\nThe memory store under a flood of distinct keys of one rule, each spending its whole allowance within the hour.\n\n")
		if err := writeFlood(stdout, rs); err != nil {
			return err
		}
		for _, r := range rs {
			if r.Other > 0 {
				broken = append(broken, fmt.Errorf("%v at %d MiB: a flood of one rule refused %d fresh actors of another", r.Limit, r.MaxBytes>>20, r.Other))
			}
		}
	}
	for _, r := range results {
		if err := r.Check(); err != nil {
			broken = append(broken, err)
		}
	}
	if broken != nil {
		return fmt.Errorf("accuracy: stated bounds broken:\n%w", errors.Join(broken...))
	}
	return nil
}

// runEviction measures the memory store at its cap, writes the table
// with write, and returns the rows that broke a stated bound.
func runEviction(ctx context.Context, w io.Writer, write func(io.Writer, []accuracy.Result) error, seed uint64) ([]error, error) {
	evicted, err := accuracy.RunEviction(ctx, accuracy.EvictionLimits(evictionRate), accuracy.EvictionCases(), seed)
	if err != nil {
		return nil, fmt.Errorf("accuracy: %w", err)
	}
	fmt.Fprintf(w, "\nThe memory store at its cap, %d/min per actor (one shard; eviction samples from a random place: figures vary a little from run to run).\n\n", evictionRate)
	if err := write(w, evicted); err != nil {
		return nil, err
	}
	var broken []error
	for _, r := range evicted {
		if r.OverExact > 0 || r.OverBound > 0 {
			broken = append(broken, fmt.Errorf("%v on %s: %d takes over-admitted, %d units over the stated bound", r.Limit, r.Trace, r.OverExact, r.OverBound))
		}
	}
	return broken, nil
}
