package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/load"
)

const benchHelp = `usage: sluice bench -server URL (-domain D -descriptor K=V[,K=V]... | -rule R)
                    [-keys N] [-key-prefix P] [-hits N] [-c N] [-rate R] [-conns N]
                    [-d D] [-n N] [-timeout D] [-json] [-quiet]
                    ` + tlsUsage + `

Drives a running sluice server on this machine (loopback addresses only)
for -d or -n requests, whichever comes first. It prints a line per second
to stderr while it runs, then the throughput and the latency histogram
with p50, p90, p99 and p999.

By default it is a closed loop: -c requests in flight over -conns
connections, each sent when one returns. That finds the most the server
answers at a concurrency, not its latency at a given load. With -rate R it
is an open loop: R requests a second on a fixed schedule, at most -c in
flight, and each latency is measured from the request's intended send
time, so a stall counts in every request it delayed (as wrk2 and vegeta
measure). A request that finds -c in flight waits and is reported late;
those still waiting when -d is up are reported missed. Latency at half
load: run closed to find the maximum, then -rate at half of it.

The server is grpc://host:port for Envoy's rate limit API (sluice serve
-grpc-listen, or any server of envoy.service.ratelimit.v3, such as
envoyproxy/ratelimit), http://host:port for sluice's HTTP API (POST
/v1/check), or http://host:port/json for envoyproxy/ratelimit's HTTP
endpoint, which sluice serve answers too (200 allowed, 429 over the
limit). In descriptor values, {key} stands for the request's key: -keys N
cycles through N keys (1: a hot key).

Example:

  sluice bench -server grpc://127.0.0.1:8082 -domain edge -descriptor 'remote_address={key}' -keys 10000 -c 64 -d 10s
  sluice bench -server grpc://127.0.0.1:8082 -domain edge -descriptor 'remote_address={key}' -keys 10000 -rate 5000 -d 10s
  sluice bench -server http://127.0.0.1:8080 -rule api -keys 1000 -n 100000
  sluice bench -server http://127.0.0.1:8080/json -domain edge -descriptor 'remote_address={key}' -keys 10000 -d 10s
`

// descriptors collects repeated -descriptor flags.
type descriptors []string

func (d *descriptors) String() string     { return strings.Join(*d, " ") }
func (d *descriptors) Set(v string) error { *d = append(*d, v); return nil }

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var c load.Config
	var descs descriptors
	fs.StringVar(&c.Target, "server", "", "the server's `URL`: grpc://host:port, http://host:port or http://host:port/json (grpcs://, https:// over TLS), on a loopback address")
	alias(fs, "target", "server", stderr)
	fs.StringVar(&c.Domain, "domain", "", "`domain` of the descriptors")
	fs.Var(&descs, "descriptor", "a descriptor, `key=value[,key=value...]`; repeat for several per request")
	fs.StringVar(&c.Rule, "rule", "", "named `rule` to check with the HTTP API, instead of -domain")
	fs.IntVar(&c.Keys, "keys", 1, "distinct keys to cycle through")
	fs.StringVar(&c.KeyPrefix, "key-prefix", "k", "`prefix` of every key")
	fs.IntVar(&c.Hits, "hits", 1, "cost of each request (hits_addend)")
	fs.IntVar(&c.Concurrency, "c", load.DefaultConcurrency, "requests in flight (with -rate: the most in flight)")
	fs.Float64Var(&c.Rate, "rate", 0, "send this many requests `per second` on a fixed schedule (0: a closed loop of -c in flight)")
	fs.IntVar(&c.Conns, "conns", load.DefaultConns, "connections")
	fs.DurationVar(&c.Duration, "d", load.DefaultDuration, "how long to run")
	fs.Int64Var(&c.Requests, "n", 0, "how many requests to send (0: until -d)")
	fs.DurationVar(&c.Timeout, "timeout", 5*time.Second, "bound on each request")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	quiet := fs.Bool("quiet", false, "no progress lines")
	var tf tlsFlags
	tf.register(fs, stderr)
	pos, err := parseFlags(fs, benchHelp, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError(fmt.Sprintf("bench: unexpected argument %q (run \"sluice bench -h\")", pos[0]))
	}
	if c.Target == "" {
		return usageError("bench: -server is required (run \"sluice bench -h\")")
	}
	c.Descriptors = descs
	if c.TLS, err = tf.config(); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if !*quiet {
		c.Progress = stderr
	}
	r, err := load.Run(ctx, c)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(benchJSON(c, r))
	}
	printReport(stdout, c, r)
	if r.Requests == 0 && r.FirstError != nil {
		return fmt.Errorf("bench: every request failed: %w", r.FirstError)
	}
	return nil
}

// benchReport is the JSON form of a report.
type benchReport struct {
	Target             string  `json:"target"`
	Concurrency        int     `json:"concurrency"`
	Conns              int     `json:"conns"`
	Seconds            float64 `json:"seconds"`
	Requests           int64   `json:"requests"`
	Allowed            int64   `json:"allowed"`
	OverLimit          int64   `json:"over_limit"`
	Errors             int64   `json:"errors"`
	RequestsPerSecond  float64 `json:"requests_per_second"`
	DecisionsPerSecond float64 `json:"decisions_per_second"`
	P50, P90, P99      float64 // milliseconds
	P999               float64 `json:"P999"`
	Max                float64 `json:"Max"`
	FirstError         string  `json:"first_error,omitempty"`
	// Schedule describes a fixed-rate run (-rate); latencies are then
	// from each request's intended send time.
	Schedule *benchSchedule `json:"schedule,omitempty"`
}

// benchSchedule is the JSON form of a fixed-rate run's schedule.
type benchSchedule struct {
	OfferedRate float64 `json:"offered_rate"`
	Scheduled   int64   `json:"scheduled"`
	Late        int64   `json:"late"`
	Missed      int64   `json:"missed"`
	// The send lag, in milliseconds: how long after its intended time
	// each request was sent.
	LagP50 float64 `json:"lag_P50"`
	LagP99 float64 `json:"lag_P99"`
	LagMax float64 `json:"lag_Max"`
}

func benchJSON(c load.Config, r *load.Report) benchReport {
	ms := func(q float64) float64 { return float64(r.Quantile(q)) / float64(time.Millisecond) }
	out := benchReport{
		Target: c.Target, Concurrency: c.Concurrency, Conns: c.Conns, Seconds: r.Elapsed.Seconds(),
		Requests: r.Requests, Allowed: r.Allowed, OverLimit: r.OverLimit, Errors: r.Errors,
		RequestsPerSecond: r.PerSecond(), DecisionsPerSecond: r.DecisionsPerSecond(),
		P50: ms(0.5), P90: ms(0.9), P99: ms(0.99), P999: ms(0.999),
		Max: float64(r.Latency.Max()) / 1000,
	}
	if r.FirstError != nil {
		out.FirstError = r.FirstError.Error()
	}
	if r.Rate > 0 {
		lag := func(q float64) float64 { return float64(r.Lag.ValueAtQuantile(q*100)) / 1000 }
		out.Schedule = &benchSchedule{
			OfferedRate: r.Rate, Scheduled: r.Scheduled, Late: r.Late, Missed: r.Missed,
			LagP50: lag(0.5), LagP99: lag(0.99), LagMax: float64(r.Lag.Max()) / 1000,
		}
	}
	return out
}

// printReport writes the report for a human: totals, percentiles, and a
// histogram of latency in power-of-two buckets.
func printReport(w io.Writer, c load.Config, r *load.Report) {
	inFlight := "in flight"
	if r.Rate > 0 {
		inFlight = "at most in flight"
	}
	fmt.Fprintf(w, "target     %s (%d %s over %d connections, %d keys)\n", c.Target, max(c.Concurrency, 1), inFlight, max(min(c.Conns, c.Concurrency), 1), max(c.Keys, 1))
	if r.Rate > 0 {
		fmt.Fprintf(w, "schedule   %g/s offered, %d requests: %d late (%d in flight), %d missed\n", r.Rate, r.Scheduled, r.Late, max(c.Concurrency, 1), r.Missed)
	}
	fmt.Fprintf(w, "requests   %d in %.2fs: %.0f/s, %.0f decisions/s\n", r.Requests, r.Elapsed.Seconds(), r.PerSecond(), r.DecisionsPerSecond())
	pct := func(n int64) float64 {
		if r.Requests == 0 {
			return 0
		}
		return 100 * float64(n) / float64(r.Requests)
	}
	fmt.Fprintf(w, "verdicts   %d allowed (%.1f%%), %d over the limit (%.1f%%), %d errors\n", r.Allowed, pct(r.Allowed), r.OverLimit, pct(r.OverLimit), r.Errors)
	if r.FirstError != nil {
		fmt.Fprintf(w, "first error %v\n", r.FirstError)
	}
	if r.Requests == 0 {
		return
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	fmt.Fprintf(w, "latency    min %v  p50 %v  p90 %v  p99 %v  p999 %v  max %v\n",
		us(r.Latency.Min()), r.Quantile(0.5), r.Quantile(0.9), r.Quantile(0.99), r.Quantile(0.999), us(r.Latency.Max()))
	if r.Rate > 0 {
		fmt.Fprintln(w, "           (from each request's intended send time)")
		fmt.Fprintf(w, "send lag   p50 %v  p99 %v  max %v  (intended to actual send: a busy generator or -c reached)\n",
			us(r.Lag.ValueAtQuantile(50)), us(r.Lag.ValueAtQuantile(99)), us(r.Lag.Max()))
	}
	// Buckets of powers of two microseconds, from the fastest request's.
	lo := int64(1) << int(math.Floor(math.Log2(float64(max(r.Latency.Min(), 1)))))
	var rows [][2]int64 // upper bound in µs, count
	var most int64
	for b := lo; b/2 <= r.Latency.Max(); b *= 2 {
		var n int64
		for _, bar := range r.Latency.Distribution() {
			if bar.Count > 0 && bar.From >= b/2 && bar.From < b {
				n += bar.Count
			}
		}
		if b == lo {
			n = 0
			for _, bar := range r.Latency.Distribution() {
				if bar.From < b {
					n += bar.Count
				}
			}
		}
		rows = append(rows, [2]int64{b, n})
		most = max(most, n)
	}
	fmt.Fprintln(w, "histogram")
	for _, row := range rows {
		bar := 0
		if most > 0 {
			bar = int(40 * row[1] / most)
		}
		fmt.Fprintf(w, "  < %-9v %7d %5.1f%% %s\n", us(row[0]), row[1], pct(row[1]), strings.Repeat("#", bar))
	}
}
