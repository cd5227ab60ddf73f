// Command sluice runs and queries the sluice rate-limiting service.
//
//	sluice serve                      serve the HTTP API (built-in sample rules)
//	sluice check RULE KEY             ask a running server about one request
//	sluice bans list|add|lift|export  manage a running server's bans
//	sluice config validate FILE...    check rule files
//	sluice simulate -config F LOG...  replay access logs through rules
//	sluice accuracy                   measure every algorithm against an oracle
//	sluice version                    print the version
//
// Run "sluice help" for the flags and an example of each.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/suggest"
)

const usage = `sluice: a rate limiter and abuse throttle.

Usage:

  sluice <command> [flags] [arguments]

Commands:

  serve      serve the HTTP API, forward-auth, gRPC, /metrics and the admin API
  check      ask a running server whether KEY may act now under RULE
  bans       list, add, lift or export the bans of a running server
  config     validate rule files, or print the built-in sample rules
  simulate   replay access logs through rules: who would have been limited
  bench      load a running server on loopback: throughput and latency
  accuracy   measure every algorithm against a brute-force oracle
  version    print the version and commit of this binary (also --version)
  help       print this list, or with a command its flags and examples

Run "sluice help <command>" or "sluice <command> -h" for a command's flags
and examples.
Exit status: 0 success, 1 failure, 2 bad usage, 3 "check" denied.
`

// commands are the subcommands, in the order of the usage.
var commands = []struct {
	name string
	run  func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}{
	{"serve", runServe},
	{"check", runCheck},
	{"bans", runBans},
	{"config", runConfig},
	{"simulate", runSimulate},
	{"bench", runBench},
	{"accuracy", runAccuracy},
	{"version", runVersion},
}

// commandNames returns the names of the subcommands and "help".
func commandNames() []string {
	names := make([]string, 0, len(commands)+1)
	for _, c := range commands {
		names = append(names, c.name)
	}
	return append(names, "help")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	report(os.Stderr, err)
	os.Exit(exitCode(err))
}

// report writes err for a person: each line of it once, with one
// prefix. The mistakes of a configuration file carry their own, the
// file's name and place ("sluice.yaml:7:13: rules[1].limits[0]: ..."),
// as a compiler's do; any other line gets "sluice: ". The help a person
// asked for and a denial of "check" (which printed its answer) are no
// errors to report.
func report(w io.Writer, err error) {
	if err == nil || errors.Is(err, flag.ErrHelp) || errors.Is(err, errDenied) {
		return
	}
	var ce config.Errors
	if errors.As(err, &ce) {
		for _, e := range ce {
			fmt.Fprintln(w, e)
		}
		return
	}
	for _, line := range strings.Split(strings.TrimRight(err.Error(), "\n"), "\n") {
		fmt.Fprintln(w, "sluice:", line)
	}
}

// run runs the command line args (without the program name), writing
// output to stdout and diagnostics to stderr, until it is done or ctx is
// cancelled.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError("no command given")
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "-version", "--version":
		cmd = "version"
	case "help", "-h", "-help", "--help":
		if len(args) == 0 {
			fmt.Fprint(stdout, usage)
			return nil
		}
		if len(args) > 1 {
			return usageError("help: want one command at most (run \"sluice help\")")
		}
		cmd, args = args[0], []string{"-h"} // "sluice help serve" is "sluice serve -h"
	}
	for _, c := range commands {
		if c.name == cmd {
			return c.run(ctx, args, stdout, stderr)
		}
	}
	return usageError(fmt.Sprintf("unknown command %q%s (run \"sluice help\" for the list)", cmd, suggest.DidYouMean(cmd, commandNames())))
}

// A usageError is a mistake in how sluice was invoked: exit status 2.
type usageError string

func (e usageError) Error() string { return string(e) }

// errDenied is what "check" returns when the server denied the request:
// exit status 3, so that scripts can tell a denial from a failure.
var errDenied = errors.New("denied")

// exitCode maps run's error to the process's exit status.
func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errDenied):
		return 3
	case errors.As(err, &ue):
		return 2
	}
	return 1
}
