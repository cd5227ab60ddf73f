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

Prints the module version of this binary, the commit it was built from and
its time (when Go recorded them: go build and go install in a git checkout
do, go run does not) and the Go version that built it.

Example:

  sluice version
  sluice v0.1.0 (commit 0123abcdef01 of 2026-11-25T21:28:58Z, go1.26.8 linux/amd64)
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
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "sluice (unknown) (" + goBuild() + ")"
	}
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	commit := vcs["vcs.revision"]
	if commit == "" {
		return fmt.Sprintf("sluice %s (no commit recorded: built by go run, or with -buildvcs=false; %s)", bi.Main.Version, goBuild())
	}
	commit = commit[:min(len(commit), 12)]
	if vcs["vcs.modified"] == "true" {
		commit += "+dirty"
	}
	if t := vcs["vcs.time"]; t != "" {
		commit += " of " + t
	}
	return fmt.Sprintf("sluice %s (commit %s, %s)", bi.Main.Version, commit, goBuild())
}

// goBuild names the Go version and platform of the binary.
func goBuild() string { return runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH }
