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
  version    print the version and commit of this binary
  help       print this list

Run "sluice <command> -h" for a command's flags and examples.
Exit status: 0 success, 1 failure, 2 bad usage, 3 "check" denied.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) && !errors.Is(err, errDenied) {
		fmt.Fprintln(os.Stderr, "sluice:", err)
	}
	os.Exit(exitCode(err))
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
	case "serve":
		return runServe(ctx, args, stdout, stderr)
	case "check":
		return runCheck(ctx, args, stdout, stderr)
	case "bans":
		return runBans(ctx, args, stdout, stderr)
	case "config":
		return runConfig(ctx, args, stdout, stderr)
	case "simulate":
		return runSimulate(ctx, args, stdout, stderr)
	case "bench":
		return runBench(ctx, args, stdout, stderr)
	case "accuracy":
		return runAccuracy(ctx, args, stdout, stderr)
	case "version":
		return runVersion(ctx, args, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return usageError(fmt.Sprintf("unknown command %q (run \"sluice help\")", cmd))
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

// parseFlags parses args into fs and returns the positional arguments,
// which may come before, between or after the flags ("check login k
// -cost 2"); "--" ends the flags. On -h it prints help to stdout and
// returns flag.ErrHelp; a bad flag is a usageError.
func parseFlags(fs *flag.FlagSet, help string, args []string, stdout io.Writer) ([]string, error) {
	fs.SetOutput(io.Discard) // errors are returned, help printed below
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printHelp(fs, help, stdout)
				return nil, err
			}
			return nil, usageError(fmt.Sprintf("%s: %v (run \"sluice %s -h\")", fs.Name(), err, fs.Name()))
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

// printHelp writes a command's help text and its flags.
func printHelp(fs *flag.FlagSet, help string, w io.Writer) {
	fmt.Fprint(w, help)
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	if b.Len() > 0 {
		fmt.Fprintf(w, "\nFlags:\n%s", b.String())
	}
}
