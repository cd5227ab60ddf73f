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

Prints the module version of this binary and the Go version that built it.
The module version is the release tag (vMAJOR.MINOR.PATCH) for a binary
installed with go install github.com/sluicehq/sluice/cmd/sluice@vX.Y.Z or
built at a tagged commit; a build between tags has a pseudo-version
(v0.4.1-0.20261125212858-0123abcdef01). A build in a git checkout also
names its commit (+dirty with uncommitted changes); go run records none.

Examples:

  sluice version
  sluice v0.4.0 (go1.26.8 linux/amd64)
  sluice v0.4.1-0.20261125212858-0123abcdef01 (commit 0123abcdef01 of 2026-11-25T21:28:58Z, go1.26.8 linux/amd64)
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
	return describeBuild(bi.Main.Version, bi.Settings, goBuild())
}

// describeBuild says what a build is: its module version (a release tag or a
// pseudo-version; "(devel)" when Go knew none), then the commit when Go
// recorded one, and the Go that built it.
func describeBuild(module string, settings []debug.BuildSetting, build string) string {
	vcs := map[string]string{}
	for _, s := range settings {
		vcs[s.Key] = s.Value
	}
	commit := vcs["vcs.revision"]
	switch {
	case commit != "":
		commit = commit[:min(len(commit), 12)]
		if vcs["vcs.modified"] == "true" {
			commit += "+dirty"
		}
		if t := vcs["vcs.time"]; t != "" {
			commit += " of " + t
		}
		return fmt.Sprintf("sluice %s (commit %s, %s)", module, commit, build)
	case module == "" || module == "(devel)":
		return fmt.Sprintf("sluice (devel) (no version or commit recorded: built by go run, or with -buildvcs=false; %s)", build)
	}
	return fmt.Sprintf("sluice %s (%s)", module, build) // go install …@version
}

// goBuild names the Go version and platform of the binary.
func goBuild() string { return runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH }
