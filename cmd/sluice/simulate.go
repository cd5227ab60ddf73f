package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/simulate"
	"github.com/sluicehq/sluice/simulate/accesslog"
	"github.com/sluicehq/sluice/simulate/loggen"
)

const simulateHelp = `usage: sluice simulate -config FILE [-rule NAME[=/PATH]]... [-compare FILE]
                       [-format F [-fields MAPPING]] [-user-header H] [-strict] [-max-line N]
                       [-workers N] [-top N] [-json] [-html FILE] [LOG...]
       sluice simulate -generate N [-seed S] > access.log

Replays access logs through the rules of FILE, deciding each request
exactly as "sluice serve -config FILE" would have through forward-auth
(the same rules engine, guard, jails and bans; the client behind the
trusted proxies; the log's own timestamps as the clock), on a memory
store of its own, and reports per rule: requests, would-deny, bans,
keys affected, first and last denial, the keys denied most, and the
share of traffic from keys ever denied.

LOG files are nginx or Apache combined/common logs, or the JSON access
logs of Caddy, Envoy or Traefik (-format, detected by default), or any
JSON lines with -format json -fields; plain or gzip; "-" or none reads
standard input. Several files are merged in time order. Malformed lines
are counted and the first few shown (-strict: the first is fatal). A
file that ends early (a truncated gzip) or a check that fails still gets
its report of what was read, then exit status 1.

Each request is checked against every named rule, or against those of
-rule (NAME, or NAME=/path/prefix for the requests under a path, as an
auth_request location would), or forward_auth.rule when the file sets it.

-generate writes N lines of a synthetic combined log (Zipf clients, a
credential-stuffing botnet in a /16, an IPv6 client rotating in a /64,
a crawler, a daily cycle) for trying rules out.

Examples:

  sluice simulate -config rules.yaml /var/log/nginx/access.log*
  sluice simulate -config rules.yaml -rule login=/login -html report.html access.log.gz
  sluice simulate -config new.yaml -compare old.yaml access.log
  zcat caddy.json.gz | sluice simulate -config rules.yaml -json > report.json
`

// simulateGOGC is the GOGC of sluice simulate, unless the variable is set.
const simulateGOGC = 400

// routeFlags collects -rule flags.
type routeFlags []simulate.Route

func (r *routeFlags) String() string { return fmt.Sprint(*r) }
func (r *routeFlags) Set(s string) error {
	rt, err := simulate.ParseRoute(s)
	if err == nil {
		*r = append(*r, rt)
	}
	return err
}

type simulateFlags struct {
	cfg, compare, format, fields, html, userHeader string
	routes                                         routeFlags
	json, strict                                   bool
	maxLine, top, generate, workers                int
	seed                                           uint64
	files                                          []string
}

func parseSimulate(args []string, stdout io.Writer) (simulateFlags, error) {
	var f simulateFlags
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.StringVar(&f.cfg, "config", "", "the rules `file` to replay through (required)")
	fs.Var(&f.routes, "rule", "check requests against the named `rule`, or rule=/path/prefix for those under a path; repeatable (default forward_auth.rule, else every named rule)")
	fs.StringVar(&f.compare, "compare", "", "a second rules `file`: report which requests and keys one set denies and the other does not")
	fs.StringVar(&f.format, "format", "auto", "log `format`: auto, combined, common, caddy, envoy, traefik or json")
	fs.StringVar(&f.fields, "fields", "", "with -format json, the `mapping` of fields: time=PATH,addr=PATH[,forwarded=,user=,method=,uri=,proto=,host=,referer=,agent=,status=]")
	fs.BoolVar(&f.json, "json", false, "print the report as JSON")
	fs.StringVar(&f.html, "html", "", "also write an HTML report with plots to `file`")
	fs.BoolVar(&f.strict, "strict", false, "fail on the first malformed line or truncated file")
	fs.IntVar(&f.maxLine, "max-line", accesslog.DefaultMaxLine, "longest line in `bytes`; longer lines are counted malformed")
	fs.IntVar(&f.workers, "workers", 0, "how many goroutines decide, each the clients of a share of the networks; 1 replays in log order (default: one per processor when forward_auth.key holds \"ip\" and there is no -compare, else 1)")
	fs.IntVar(&f.top, "top", 20, "how many of the keys denied most to list per rule")
	fs.StringVar(&f.userHeader, "user-header", simulate.DefaultUserHeader, "the `header` a line's user is sent in, for a key part header:NAME")
	fs.IntVar(&f.generate, "generate", 0, "write `N` lines of a synthetic combined log to standard output, and exit")
	fs.Uint64Var(&f.seed, "seed", 1, "with -generate, the seed of the traffic")
	pos, err := parseFlags(fs, simulateHelp, args, stdout)
	if err != nil {
		return f, err
	}
	f.files = pos
	switch {
	case f.generate > 0 && (len(pos) > 0 || f.cfg != ""):
		return f, usageError("simulate: -generate takes no rules and no logs")
	case f.generate == 0 && f.cfg == "":
		return f, usageError("simulate: -config FILE is required (run \"sluice simulate -h\")")
	}
	return f, nil
}

// runSimulate implements "sluice simulate".
func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseSimulate(args, stdout)
	if err != nil {
		return err
	}
	if f.generate > 0 {
		return loggen.Write(stdout, f.generate, loggen.Config{Seed: f.seed})
	}
	o, err := simulateOptions(f)
	if err != nil {
		return err
	}
	if os.Getenv("GOGC") == "" {
		// A replay's live heap is small (the states of the active keys,
		// fixed sketches) and its garbage plenty (serve's request path):
		// collect less often, for a fifth more lines a second.
		debug.SetGCPercent(simulateGOGC)
	}
	if isTerminal(stderr) {
		o.Progress = stderr
	}
	rep, err := simulate.Run(ctx, o)
	if err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	if f.html != "" {
		if err := writeHTML(f.html, rep); err != nil {
			return fmt.Errorf("simulate: %w", err)
		}
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	return incomplete(rep)
}

// incomplete fails a replay whose report lacks part of its input: a log
// that ended early (a truncated gzip, a read error) or a check that
// failed. The report, written before, covers what was read; the exit
// status tells scripts it is not the whole story.
func incomplete(rep *simulate.Report) error {
	if len(rep.Errors) == 0 {
		return nil
	}
	return fmt.Errorf("simulate: the report is incomplete: %s", strings.Join(rep.Errors, "; "))
}

// simulateOptions loads the rule files and the format of f.
func simulateOptions(f simulateFlags) (simulate.Options, error) {
	o := simulate.Options{Files: f.files, Strict: f.strict, MaxLine: f.maxLine, RulesName: f.cfg, CompareName: f.compare, Workers: f.workers}
	o.Config = simulate.Config{Routes: f.routes, UserHeader: f.userHeader, TopKeys: f.top, NoRates: !f.json && f.html == ""}
	var err error
	if o.Config.Rules, err = loadRules(f.cfg); err != nil {
		return o, err
	}
	if f.compare != "" {
		if o.Compare, err = loadRules(f.compare); err != nil {
			return o, err
		}
	}
	if f.format != "auto" {
		var m accesslog.Mapping
		if f.fields != "" {
			if m, err = accesslog.ParseMapping(f.fields); err != nil {
				return o, usageError("simulate: -fields: " + err.Error())
			}
		}
		if o.Format, err = accesslog.FormatNamed(f.format, m); err != nil {
			return o, usageError("simulate: -format: " + err.Error())
		}
	} else if f.fields != "" {
		return o, usageError("simulate: -fields needs -format json")
	}
	return o, nil
}

// loadRules loads a rules file as sluice config validate does: a secret
// whose environment variable is unset does not stop a replay, which
// needs no secret.
func loadRules(path string) (*config.Config, error) {
	c, _, err := config.Validate(path)
	return c, err
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0 && !strings.HasPrefix(os.Getenv("TERM"), "dumb")
}

// writeHTML writes the HTML report of rep to path.
func writeHTML(path string, rep *simulate.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteHTML(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
