package main

import (
	"bytes"
	"errors"
	"flag"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// flagLine is a flag's line in the "Flags:" part of a command's help.
var flagLine = regexp.MustCompile(`(?m)^  -([a-z0-9][a-z0-9-]*)`)

// synopsis returns the usage lines of help: up to its first blank line.
func synopsis(help string) string {
	s, _, _ := strings.Cut(help, "\n\n")
	return s
}

// TestConventions holds every subcommand to the conventions of the
// command line: "sluice help CMD" prints what "sluice CMD -h" does,
// every flag the help lists is in the command's usage lines, and no
// name means two things across the commands.
func TestConventions(t *testing.T) {
	for _, c := range commands {
		help, _, err := runCmd(t, c.name, "-h")
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s -h: %v, want the help", c.name, err)
			continue
		}
		if out, _, err := runCmd(t, "help", c.name); exitCode(err) != 0 || out != help {
			t.Errorf("help %s = %q, %v; want what %s -h prints:\n%s", c.name, out, err, c.name, help)
		}
		syn := synopsis(help)
		if !strings.HasPrefix(syn, "usage: sluice "+c.name) {
			t.Errorf("%s -h begins %q, want \"usage: sluice %s\"", c.name, syn, c.name)
		}
		_, flags, _ := strings.Cut(help, "\nFlags:\n")
		for _, m := range flagLine.FindAllStringSubmatch(flags, -1) {
			name := m[1]
			if !regexp.MustCompile(`(^|[\s\[(|])-` + regexp.QuoteMeta(name) + `([\s\]=|)]|$)`).MatchString(syn) {
				t.Errorf("%s: flag -%s is not in the usage lines:\n%s", c.name, name, syn)
			}
		}
		if clientCommands[c.name] {
			for _, name := range []string{"server", "timeout", "tls-ca", "tls-cert", "tls-key"} {
				if !strings.Contains(flags, "  -"+name+" ") {
					t.Errorf("%s talks to a server but has no -%s, the flag every such command has", c.name, name)
				}
			}
		}
		for old, new := range renamedFlags {
			if strings.Contains(flags, "  -"+old+" ") || strings.Contains(flags, "  -"+old+"\n") {
				t.Errorf("%s -h lists -%s, deprecated for -%s", c.name, old, new)
			}
		}
	}
}

// clientCommands are the commands that talk to a running server: each
// names it with -server, bounds a request with -timeout and reaches TLS
// with -tls-ca, -tls-cert and -tls-key.
var clientCommands = map[string]bool{"check": true, "bans": true, "bench": true}

// renamedFlags are the old names of renamed flags, kept for one release:
// the server's URL had three names, and -key was a TLS file beside
// -keys, a count of rate-limit keys.
var renamedFlags = map[string]string{"target": "server", "admin": "server", "cacert": "tls-ca", "cert": "tls-cert", "key": "tls-key"}

// TestVersionSpellings checks that "sluice --version", "-version" and
// "version" print the same.
func TestVersionSpellings(t *testing.T) {
	want, _, err := runCmd(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{"--version", "-version"} {
		if out, _, err := runCmd(t, arg); err != nil || out != want {
			t.Errorf("sluice %s = %q, %v; want %q", arg, out, err, want)
		}
	}
}

// TestUsageMistakes checks the answers to unknown commands and flags: a
// usage error (exit 2) that says what was meant.
func TestUsageMistakes(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"serv"}, `unknown command "serv"; did you mean "serve"?`},
		{[]string{"frobnicate"}, `unknown command "frobnicate" (run "sluice help" for the list)`},
		{[]string{"help", "serv"}, `did you mean "serve"?`},
		{[]string{"help", "serve", "check"}, "one command at most"},
		{[]string{"serve", "-lisen", "127.0.0.1:0"}, "serve: unknown flag -lisen; did you mean -listen?"},
		{[]string{"check", "--servr", "http://x", "a", "b"}, "did you mean -server?"},
		{[]string{"bench", "-zzz"}, `bench: unknown flag -zzz (run "sluice bench -h")`},
		{[]string{"check", "-cost", "x", "login", "k"}, `invalid value "x" for flag -cost`},
	} {
		_, _, err := runCmd(t, tt.args...)
		if exitCode(err) != 2 || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("sluice %q: %v, want exit 2 and %q", tt.args, err, tt.want)
		}
	}
}

// TestDeprecatedFlags checks that the old names of renamed flags still
// work for this release, with a warning on stderr.
func TestDeprecatedFlags(t *testing.T) {
	url := startServe(t)
	var out, errOut bytes.Buffer
	err := run(t.Context(), []string{"check", "-target", url, "login", "k"}, &out, &errOut)
	if exitCode(err) != 2 {
		t.Errorf("check -target: %v, want a usage error (check never had -target)", err)
	}
	out.Reset()
	errOut.Reset()
	err = run(t.Context(), []string{"bench", "-target", url, "-rule", "api", "-n", "3", "-quiet"}, &out, &errOut)
	if err != nil || !strings.Contains(out.String(), "requests   3") || !strings.Contains(errOut.String(), "-target is deprecated and goes in the next release: use -server") {
		t.Errorf("bench -target = %q, stderr %q, %v; want a run, and the warning", out.String(), errOut.String(), err)
	}
}

// TestReport checks what main writes for an error: one "sluice: "
// prefix per line.
func TestReport(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{flag.ErrHelp, ""},
		{errDenied, ""},
		{errors.New("boom"), "sluice: boom\n"},
		{errors.Join(errors.New("one"), errors.New("two")), "sluice: one\nsluice: two\n"},
	} {
		var b bytes.Buffer
		report(&b, tt.err)
		if b.String() != tt.want {
			t.Errorf("report(%v) = %q, want %q", tt.err, b.String(), tt.want)
		}
	}
}

// TestServeTakenPort checks that a taken port stops sluice serve before
// it serves anything, naming the address and how to choose another, and
// that two doors given one address are refused.
func TestServeTakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	port, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	free := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "-listen", taken}, "listening: " + taken + " is taken by another program (another sluice serve?): stop it, or give another address with -listen or listen"},
		{[]string{"serve", "-listen", "127.0.0.1:0", "-grpc-listen", taken}, "grpc: " + taken + " is taken by another program (another sluice serve?): stop it, or give another address with -grpc-listen or grpc.listen"},
		{[]string{"serve", "-listen", free, "-grpc-listen", free}, "grpc: " + free + " is also the address of listening (listen)"},
	} {
		out, _, err := runCmd(t, tt.args...)
		if exitCode(err) != 1 || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("sluice %q: %v, want exit 1 and %q", tt.args, err, tt.want)
		}
		if out != "" {
			t.Errorf("sluice %q announced %q before failing, want nothing: a half-started server", tt.args, out)
		}
	}
}
