package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sluicehq/sluice/internal/suggest"
)

// parseFlags parses args into fs and returns the positional arguments,
// which may come before, between or after the flags ("check login k
// -cost 2"); "--" ends the flags. On -h it prints help to stdout and
// returns flag.ErrHelp; a bad flag is a usageError, with the flag the
// person likely meant.
func parseFlags(fs *flag.FlagSet, help string, args []string, stdout io.Writer) ([]string, error) {
	fs.SetOutput(io.Discard) // errors are returned, help printed below
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printHelp(fs, help, stdout)
				return nil, err
			}
			return nil, flagError(fs, err)
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagError is the usageError for err, an error of fs.Parse: an unknown
// flag names the closest one fs has.
func flagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) {
			if !isDeprecated(f) {
				names = append(names, f.Name)
			}
		})
		msg = "unknown flag -" + name
		if s, ok := suggest.Closest(strings.TrimLeft(name, "-"), names); ok {
			msg += "; did you mean -" + s + "?"
		}
	}
	return usageError(fmt.Sprintf("%s: %s (run \"sluice %s -h\")", fs.Name(), msg, fs.Name()))
}

// printHelp writes a command's help text and its flags, but for the
// deprecated ones.
func printHelp(fs *flag.FlagSet, help string, w io.Writer) {
	fmt.Fprint(w, help)
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	fs.VisitAll(func(f *flag.Flag) {
		if !isDeprecated(f) {
			shown.Var(f.Value, f.Name, f.Usage)
		}
	})
	var b strings.Builder
	shown.SetOutput(&b)
	shown.PrintDefaults()
	if b.Len() > 0 {
		fmt.Fprintf(w, "\nFlags:\n%s", b.String())
	}
}

// An aliasFlag is the old name of a renamed flag, kept for one release:
// it sets the new flag, and tells on stderr to use the new name.
type aliasFlag struct {
	fs       *flag.FlagSet
	old, new string
	warn     io.Writer
}

// deprecatedPrefix starts the usage of a deprecated flag, which help
// does not list.
const deprecatedPrefix = "deprecated: "

// alias registers old as a deprecated name of fs's flag new, which must
// be registered first; using it writes a warning to warn.
func alias(fs *flag.FlagSet, old, new string, warn io.Writer) {
	fs.Var(&aliasFlag{fs: fs, old: old, new: new, warn: warn}, old, deprecatedPrefix+"use -"+new)
}

func (a *aliasFlag) String() string {
	if a == nil || a.fs == nil {
		return ""
	}
	return a.fs.Lookup(a.new).Value.String()
}

func (a *aliasFlag) Set(v string) error {
	fmt.Fprintf(a.warn, "sluice %s: -%s is deprecated and goes in the next release: use -%s\n", a.fs.Name(), a.old, a.new)
	return a.fs.Set(a.new, v)
}

// isDeprecated reports whether f is the old name of a renamed flag.
func isDeprecated(f *flag.Flag) bool { return strings.HasPrefix(f.Usage, deprecatedPrefix) }
