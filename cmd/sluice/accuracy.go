package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/internal/accuracy"
)

// runAccuracy implements "sluice accuracy": it replays the adversarial
// traces of package internal/accuracy through every algorithm, judges each
// decision with a brute-force oracle, prints the table (algorithm, trace,
// admitted, max in any window, limit, stated bound, over- and
// under-admitted, windows over the bound) and fails if any algorithm
// breaks its stated bound.
func runAccuracy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("accuracy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sluice accuracy [-seed N] [-format text|markdown]")
		fmt.Fprintln(stderr, "\nMeasures every algorithm against a brute-force oracle on adversarial traces.")
		fs.PrintDefaults()
	}
	seed := fs.Uint64("seed", 1, "seed of the random traces (the same seed gives the same table)")
	format := fs.String("format", "text", "table format: text or markdown")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("accuracy: unexpected argument %q", fs.Arg(0))
	}
	write := accuracy.WriteTable
	switch *format {
	case "text":
	case "markdown", "md":
		write = accuracy.WriteMarkdown
	default:
		return fmt.Errorf("accuracy: unknown format %q (want text or markdown)", *format)
	}
	results, err := accuracy.Run(ctx, accuracy.Direct, *seed)
	if err != nil {
		return fmt.Errorf("accuracy: %w", err)
	}
	fmt.Fprintf(stdout, "Accuracy of 100/min per actor on adversarial traces (seed %d); algorithms applied directly.\n\n", *seed)
	if err := write(stdout, results); err != nil {
		return err
	}
	var broken []error
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
