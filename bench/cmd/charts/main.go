// Command charts draws the headline comparisons of docs/benchmarks.md as
// SVG charts, from the results files committed under docs/results: the
// memory store on one hot key and on 1M keys (time and bytes per key), the
// Redis store (decisions/s and Redis's CPU per decision), the memcached
// store when its results are given, and sluice serve against
// envoyproxy/ratelimit (CPU per decision).
//
// Each chart shows the median of every implementation in each scenario,
// sluice's in orange and labelled with their value, the peers' muted; a †
// marks a peer that admitted a different amount than sluice, by the rule of
// bench/cmd/ratio. Its caption names the file it was drawn from. The
// output depends only on the input files: running it again changes no
// byte.
//
// Usage, from bench/ (go generate there runs the same):
//
//	go run ./cmd/charts [-root ..] [-out docs/charts] [-memory FILE] [-redis FILE] [-memcached FILE] [-service FILE]
//
// File names are relative to the repository's root, -root; the defaults
// are the results docs/benchmarks.md and docs/service.md quote.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/bench/internal/results"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "charts:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("charts", flag.ContinueOnError)
	root := fs.String("root", "..", "the repository's root, which the other paths are relative to")
	out := fs.String("out", "docs/charts", "directory the charts are written to")
	files := map[string]*string{}
	for _, s := range sources {
		files[s.flag] = fs.String(s.flag, s.file, s.usage)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: name results files with flags", fs.Args())
	}
	if err := os.MkdirAll(under(*root, *out), 0o755); err != nil {
		return err
	}
	tables := map[string]*results.Table{}
	for _, s := range specs {
		file := *files[s.source]
		if file == "" {
			fmt.Fprintf(stdout, "%s: no -%s results, skipped\n", s.name, s.source)
			continue
		}
		t, err := load(tables, under(*root, file))
		if err != nil {
			return err
		}
		name := filepath.Join(*out, s.name+".svg")
		if err := write(s, t, filepath.ToSlash(file), under(*root, name)); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: from %s\n", name, file)
	}
	return nil
}

// under returns path, relative to root unless it is absolute.
func under(root, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(root, path)
}

// load returns the table of path, read once and kept in tables.
func load(tables map[string]*results.Table, path string) (*results.Table, error) {
	if t, ok := tables[path]; ok {
		return t, nil
	}
	t, err := results.Load(path)
	if err != nil {
		return nil, err
	}
	tables[path] = t
	return t, nil
}

// write draws the chart of s from t, read from source, into path.
func write(s spec, t *results.Table, source, path string) error {
	c, err := build(s, t, source)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := render(c, &buf); err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
