package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sluicehq/sluice/config"
)

const configHelp = `usage: sluice config validate FILE...
       sluice config sample

"validate" parses and checks each rules file as "sluice serve -config"
would, and prints its rules; it reports every error it finds, each naming
the file, line and field. A secret's environment variable (token_env,
password_env) that is unset is a warning here, not an error, so that CI
can validate without the production secrets.
"sample" prints the built-in sample rules, a starting point for a file.

Example:

  sluice config sample > sluice.yaml
  sluice config validate sluice.yaml
  sluice.yaml: ok: 3 rules
    login   5/min, 20/h
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
		var errs []error
		for _, f := range files {
			c, warnings, err := config.Validate(f)
			for _, w := range warnings {
				fmt.Fprintln(stderr, "warning:", w)
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			printRules(stdout, f, c)
		}
		return errors.Join(errs...)
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

// printRules writes a summary of a valid configuration.
func printRules(w io.Writer, name string, c *config.Config) {
	fmt.Fprintf(w, "%s: ok: %d rules, store %s, listen %s\n", name, len(c.Rules), c.Store.Type, c.Listen)
	width := 0
	for _, r := range c.Rules {
		width = max(width, len(r.Name))
	}
	for _, r := range c.Rules {
		limits := make([]string, len(r.Limits))
		for i, l := range r.Limits {
			limits[i] = l.String()
		}
		fmt.Fprintf(w, "  %-*s  %s\n", width, r.Name, strings.Join(limits, ", "))
	}
}
