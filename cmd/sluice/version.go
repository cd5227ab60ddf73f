package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

const versionHelp = `usage: sluice version

Prints the module version of this binary, the commit it was built from
(when known) and the Go version that built it.

Example:

  sluice version
  sluice v0.1.0 (commit 0123abcd, go1.26.8 linux/amd64)
`

func runVersion(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	pos, err := parseFlags(fs, versionHelp, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("version: takes no arguments")
	}
	fmt.Fprintln(stdout, version())
	return nil
}

// version describes the binary from the build information Go records.
func version() string {
	v, commit := "(unknown)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		v = bi.Main.Version
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value[:min(len(s.Value), 12)]
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if commit != "" && modified {
			commit += "+dirty"
		}
	}
	build := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	if commit != "" {
		build = "commit " + commit + ", " + build
	}
	return fmt.Sprintf("sluice %s (%s)", v, build)
}
