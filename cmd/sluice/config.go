package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sluicehq/sluice/config"
)

const configHelp = `usage: sluice config validate FILE...
       sluice config sample

"validate" parses and checks each rules file (or envoyproxy/ratelimit
config directory) as "sluice serve -config" would, and prints its rules,
domains, concurrency rules and logins. With any mistake, it prints only
the mistakes, every one of every file, one a line, each naming the file,
line, column and field, what is wrong and what to write instead, and
exits 1. A secret's environment variable (token_env, password_env) or
file that is missing here is a warning, not an error, so that CI can
validate without the production secrets.
"sample" prints the built-in sample rules, a starting point for a file.

Example:

  sluice config sample > sluice.yaml
  sluice config validate sluice.yaml
  sluice.yaml: ok: 3 rules, 1 login, store memory, listen 127.0.0.1:8080
    login   5/min, 20/h
    ...
  sluice config validate /etc/ratelimit/config
  /etc/ratelimit/config: ok: 2 domains, store memory, listen 127.0.0.1:8080
    domain edge  3 descriptors, from /etc/ratelimit/config/edge.yaml:1
    ...
`

func runConfig(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("config", flag.ContinueOnError)
	pos, err := parseFlags(fs, configHelp, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError(`config: want "validate FILE..." or "sample" (run "sluice config -h")`)
	}
	switch sub, files := pos[0], pos[1:]; sub {
	case "validate":
		if len(files) == 0 {
			return usageError("config validate: want at least one FILE")
		}
		return validate(stdout, stderr, files)
	case "sample":
		if len(files) > 0 {
			return usageError("config sample: takes no arguments")
		}
		_, err := stdout.Write(config.Sample())
		return err
	default:
		return usageError(fmt.Sprintf(`config: unknown subcommand %q (want "validate" or "sample")`, sub))
	}
}

// validate checks files: with no mistake, it prints their summaries
// and warnings; else it prints nothing and returns every mistake of
// every file, as config.Errors (which main prints one a line).
func validate(stdout, stderr io.Writer, files []string) error {
	var mistakes config.Errors
	var summaries, warnings bytes.Buffer
	for _, f := range files {
		c, ws, err := config.Validate(f)
		for _, w := range ws {
			fmt.Fprintln(&warnings, "warning:", w)
		}
		var es config.Errors
		switch {
		case errors.As(err, &es):
			mistakes = append(mistakes, es...)
		case err != nil:
			mistakes = append(mistakes, &config.Error{File: f, Err: err})
		default:
			printRules(&summaries, f, c)
		}
	}
	if len(mistakes) > 0 {
		return mistakes
	}
	if _, err := warnings.WriteTo(stderr); err != nil {
		return err
	}
	_, err := summaries.WriteTo(stdout)
	return err
}

// printRules writes a summary of a valid configuration: the counts of
// what it defines, then a line for each.
func printRules(w io.Writer, name string, c *config.Config) {
	var counts []string
	for _, x := range []struct {
		n          int
		one, other string
	}{
		{len(c.Rules), "rule", "rules"}, {len(c.Domains), "domain", "domains"},
		{len(c.Concurrency), "concurrency rule", "concurrency rules"}, {len(c.Logins), "login", "logins"},
	} {
		switch {
		case x.n == 1:
			counts = append(counts, "1 "+x.one)
		case x.n > 1 || x.one == "rule" && len(c.Domains) == 0:
			counts = append(counts, fmt.Sprintf("%d %s", x.n, x.other))
		}
	}
	fmt.Fprintf(w, "%s: ok: %s, store %s, listen %s\n", name, strings.Join(counts, ", "), c.Store.Type, c.Listen)
	// A table per kind, each aligned on its own.
	table := func(n int, row func(i int) (name, what string)) {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for i := range n {
			name, what := row(i)
			fmt.Fprintf(tw, "  %s\t%s\n", name, what)
		}
		tw.Flush()
	}
	table(len(c.Rules), func(i int) (string, string) {
		limits := make([]string, len(c.Rules[i].Limits))
		for j, l := range c.Rules[i].Limits {
			limits[j] = l.String()
		}
		return c.Rules[i].Name, strings.Join(limits, ", ")
	})
	table(len(c.Domains), func(i int) (string, string) {
		d := c.Domains[i]
		return "domain " + d.Name, fmt.Sprintf("%d descriptors, from %s", countDescriptors(d.Descriptors), d.Source)
	})
	table(len(c.Concurrency), func(i int) (string, string) {
		return c.Concurrency[i].Name, fmt.Sprintf("%d in flight per key", c.Concurrency[i].Limit)
	})
	table(len(c.Logins), func(i int) (string, string) {
		return "login " + c.Logins[i].Name, "/v1/login/begin, fail and succeed; forward-auth ?login=" + c.Logins[i].Name
	})
}

// countDescriptors counts the nodes of a descriptor tree.
func countDescriptors(ds []config.Descriptor) int {
	n := len(ds)
	for _, d := range ds {
		n += countDescriptors(d.Descriptors)
	}
	return n
}
