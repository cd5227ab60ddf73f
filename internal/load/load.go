// Package load drives a running sluice server (Envoy's gRPC API or the
// HTTP API) with concurrent requests for a bounded time or count, and
// measures throughput and latency: the engine of "sluice bench". It
// refuses targets that are not on a loopback address, so that it cannot
// be pointed at someone else's service.
//
// A run is a closed loop by default: Concurrency requests in flight, each
// sent when the one before it returns. That measures the most a server
// answers at a concurrency, but not its latency at a given load: a slow
// answer delays the requests behind it, which are then never counted as
// slow (coordinated omission). With Config.Rate set, a run is an open
// loop instead: requests follow a fixed schedule, one every 1/Rate
// seconds, and each latency is measured from the request's intended send
// time, as wrk2 and vegeta do, so a stall shows in every request it
// delayed.
package load

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Defaults of Config.
const (
	DefaultConcurrency = 64
	DefaultConns       = 4
	DefaultDuration    = 10 * time.Second
)

// Config describes a load run. The zero value of each field but Target
// and either Domain or Rule means its default.
type Config struct {
	// Target is the server: grpc://host:port for Envoy's rate limit API,
	// http://host:port for the HTTP API. The host must be a loopback
	// address or a name that resolves only to loopback addresses.
	Target string
	// Domain and Descriptors are what each request asks (gRPC, or the
	// HTTP API's descriptor form): descriptors of "key=value" entries
	// joined by ',', in which {key} stands for the request's key.
	Domain      string
	Descriptors []string
	// Rule asks the HTTP API about a named rule with the request's key,
	// instead of Domain.
	Rule string
	// Keys is how many distinct keys the requests cycle through; key i
	// is KeyPrefix followed by i. Default 1: one hot key.
	Keys int
	// KeyPrefix starts every key. Default "k".
	KeyPrefix string
	// Hits is each request's cost (Envoy's hits_addend). Default 1.
	Hits int
	// Concurrency is how many requests are in flight at once; in a
	// fixed-rate run, the most that may be (see Report.Late). Default
	// DefaultConcurrency.
	Concurrency int
	// Conns is how many connections carry them: gRPC multiplexes the
	// requests over them; HTTP/1.1 opens at most Conns. Default
	// DefaultConns.
	Conns int
	// Duration bounds the run's time, Requests its count; the first bound
	// reached ends it. Default: Duration DefaultDuration, no count. In a
	// fixed-rate run they bound the schedule: requests due at or after
	// Duration are not sent, and requests in flight at its end are
	// answered (within Timeout) rather than cut short.
	Duration time.Duration
	Requests int64
	// Rate, if positive, makes the run an open loop: Rate requests per
	// second on a fixed schedule, spread over the connections, each
	// latency measured from the request's intended send time. Default 0:
	// a closed loop of Concurrency requests in flight.
	Rate float64
	// Timeout bounds each request. Default 5s.
	Timeout time.Duration
	// TLS, when set, is the client side of a TLS listener: https:// and
	// grpcs:// targets need it (or the system's roots). Default nil.
	TLS *tls.Config
	// Progress, if not nil, receives one line per second while the run
	// lasts.
	Progress io.Writer
}

// A Report is the outcome of a run.
type Report struct {
	// Requests counts the requests answered, Allowed and OverLimit their
	// verdicts, Errors those that failed (transport errors, non-200
	// answers, and in a fixed-rate run requests that timed out).
	Requests, Allowed, OverLimit, Errors int64
	// Decisions counts descriptors decided: Requests times the
	// descriptors of each.
	Decisions int64
	// Elapsed is the length of the run; for a fixed-rate run, the
	// schedule's length and then the wait for the last answers.
	Elapsed time.Duration
	// Latency holds the latency of every answered request, in
	// microseconds; in a fixed-rate run, from its intended send time.
	Latency *hdr.Histogram
	// FirstError is the first error seen, if any.
	FirstError error

	// The rest describe a fixed-rate run (Config.Rate); they are zero
	// for a closed loop.

	// Rate is the offered rate, requests per second.
	Rate float64
	// Scheduled counts the requests the schedule held within the run's
	// bounds: Requests + Errors + Missed.
	Scheduled int64
	// Late counts the requests that found Concurrency requests already
	// in flight when they were due: they waited for one to finish and
	// were sent late, the wait counted in their latency.
	Late int64
	// Missed counts the scheduled requests the run ended before
	// answering: those still waiting for a free slot when the schedule
	// ended, and, if the run's context was cancelled, those not yet sent
	// or answered then.
	Missed int64
	// Lag holds how long after its intended time each request was sent,
	// in microseconds: the wait for a free slot plus the load
	// generator's own delay. A large Lag means the generator or the cap,
	// not only the server, set the latency.
	Lag *hdr.Histogram
}

// PerSecond returns the requests answered per second.
func (r *Report) PerSecond() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// DecisionsPerSecond returns the descriptors decided per second.
func (r *Report) DecisionsPerSecond() float64 { return float64(r.Decisions) / r.Elapsed.Seconds() }

// Quantile returns the latency below which fraction q (0.99: p99) of the
// requests were answered.
func (r *Report) Quantile(q float64) time.Duration {
	return time.Duration(r.Latency.ValueAtQuantile(q*100)) * time.Microsecond
}

// client sends one request; it reports whether it was allowed.
type client interface {
	do(ctx context.Context, key string) (allowed bool, err error)
	close() error
}

// ErrNotLoopback means the target is not on a loopback address.
var ErrNotLoopback = errors.New("load: target is not a loopback address")

// Run drives cfg.Target until the run's bound, or ctx is done, and
// reports what it measured.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, u, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := loopback(ctx, u.Hostname()); err != nil {
		return nil, err
	}
	var cl client
	switch u.Scheme {
	case "grpc", "grpcs":
		cl, err = newGRPC(u.Host, cfg, u.Scheme == "grpcs")
	case "http", "https":
		cl, err = newHTTP(u, cfg)
	default:
		err = fmt.Errorf("load: target scheme %q: want grpc://, grpcs://, http:// or https://", u.Scheme)
	}
	if err != nil {
		return nil, err
	}
	defer cl.close()
	if cfg.Rate > 0 {
		return runRate(ctx, cfg, cl), nil
	}
	return runClosed(ctx, cfg, cl), nil
}

// runClosed keeps cfg.Concurrency requests in flight until the run's
// bound.
func runClosed(ctx context.Context, cfg Config, cl client) *Report {
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var (
		next  atomic.Int64 // the index of the next request
		c     counters
		mu    sync.Mutex
		total = newHistogram()
		wg    sync.WaitGroup
	)
	begin := time.Now()
	end, _ := ctx.Deadline()
	stopProgress := progress(ctx, cfg.Progress, begin, &c)
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := newHistogram()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if cfg.Requests > 0 && i >= cfg.Requests {
					break
				}
				rctx, rcancel := context.WithTimeout(ctx, cfg.Timeout)
				t0 := time.Now()
				ok, err := cl.do(rctx, cfg.key(i))
				lat := time.Since(t0)
				rcancel()
				if err != nil {
					if ctx.Err() != nil || !time.Now().Before(end) {
						// The run ended under this request (its own
						// deadline may fire before the run's).
						break
					}
					c.fail(err)
					continue
				}
				record(h, lat)
				c.answer(ok, lat)
			}
			mu.Lock()
			total.Merge(h)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(begin)
	stopProgress()
	return c.report(cfg, elapsed, total)
}

// key returns the key of request i.
func (cfg *Config) key(i int64) string {
	return cfg.KeyPrefix + strconv.FormatInt(i%int64(cfg.Keys), 10)
}

// counters are the running totals of a run, shared by its goroutines.
type counters struct {
	done, allowed, over, failed, late, latencySum atomic.Int64
	firstErr                                      atomic.Pointer[error]
}

// answer counts an answered request.
func (c *counters) answer(allowed bool, lat time.Duration) {
	c.latencySum.Add(int64(lat))
	if allowed {
		c.allowed.Add(1)
	} else {
		c.over.Add(1)
	}
	c.done.Add(1) // last: progress reads done before the rest
}

// fail counts a failed request.
func (c *counters) fail(err error) {
	c.failed.Add(1)
	c.firstErr.CompareAndSwap(nil, &err)
}

// report builds the report of a finished run.
func (c *counters) report(cfg Config, elapsed time.Duration, latency *hdr.Histogram) *Report {
	r := &Report{
		Requests: c.done.Load(), Allowed: c.allowed.Load(), OverLimit: c.over.Load(), Errors: c.failed.Load(),
		Elapsed: elapsed, Latency: latency,
	}
	r.Decisions = r.Requests * int64(max(len(cfg.Descriptors), 1))
	if e := c.firstErr.Load(); e != nil {
		r.FirstError = *e
	}
	return r
}

// The histograms record 1 µs to 60 s with 3 significant digits.
const histogramMax = 60_000_000

func newHistogram() *hdr.Histogram { return hdr.New(1, histogramMax, 3) }

// record adds d to h, in microseconds, at least 1 and at most the
// histogram's bound, so that no sample is lost.
func record(h *hdr.Histogram, d time.Duration) {
	_ = h.RecordValue(min(max(d.Microseconds(), 1), histogramMax))
}

// progress writes one line per second to w until the returned function
// is called.
func progress(ctx context.Context, w io.Writer, begin time.Time, c *counters) func() {
	if w == nil {
		return func() {}
	}
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var lastDone, lastSum int64
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				d, s := c.done.Load(), c.latencySum.Load()
				mean := time.Duration(0)
				if d > lastDone {
					mean = time.Duration((s - lastSum) / (d - lastDone))
				}
				fmt.Fprintf(w, "%5.0fs  %9d req/s  mean %-9v  total %d  over-limit %d  errors %d",
					now.Sub(begin).Seconds(), d-lastDone, mean.Round(time.Microsecond), d, c.over.Load(), c.failed.Load())
				if late := c.late.Load(); late > 0 {
					fmt.Fprintf(w, "  late %d", late)
				}
				fmt.Fprintln(w)
				lastDone, lastSum = d, s
			}
		}
	}()
	return func() { close(stop); <-finished }
}

func (cfg Config) withDefaults() (Config, *url.URL, error) {
	u, err := url.Parse(cfg.Target)
	if err != nil || u.Host == "" {
		return cfg, nil, fmt.Errorf("load: target %q: want grpc://host:port or http://host:port", cfg.Target)
	}
	if cfg.Domain == "" && cfg.Rule == "" {
		return cfg, nil, errors.New("load: give a domain and descriptors, or a rule")
	}
	if cfg.Domain != "" && cfg.Rule != "" {
		return cfg, nil, errors.New("load: give a domain or a rule, not both")
	}
	if strings.HasPrefix(u.Scheme, "grpc") && cfg.Domain == "" {
		return cfg, nil, errors.New("load: the gRPC API needs a domain and descriptors")
	}
	if cfg.Domain != "" && len(cfg.Descriptors) == 0 {
		return cfg, nil, errors.New("load: a domain needs at least one descriptor")
	}
	for _, d := range cfg.Descriptors {
		if _, err := parseDescriptor(d, ""); err != nil {
			return cfg, nil, err
		}
	}
	switch {
	case cfg.Concurrency < 0, cfg.Conns < 0, cfg.Keys < 0, cfg.Hits < 0, cfg.Requests < 0, cfg.Duration < 0, cfg.Rate < 0:
		return cfg, nil, errors.New("load: counts, durations and rates must not be negative")
	case math.IsNaN(cfg.Rate) || math.IsInf(cfg.Rate, 0) || cfg.Rate > MaxRate:
		return cfg, nil, fmt.Errorf("load: rate %v: want at most %d per second", cfg.Rate, MaxRate)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Conns == 0 {
		cfg.Conns = DefaultConns
	}
	cfg.Conns = min(cfg.Conns, cfg.Concurrency)
	if cfg.Keys == 0 {
		cfg.Keys = 1
	}
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = "k"
	}
	if cfg.Hits == 0 {
		cfg.Hits = 1
	}
	if cfg.Duration == 0 {
		cfg.Duration = DefaultDuration
		if cfg.Requests > 0 {
			cfg.Duration = time.Hour // the count bounds the run
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	return cfg, u, nil
}

// entry is one key/value pair of a descriptor.
type entry struct{ key, value string }

// parseDescriptor reads "k=v,k2=v2", with {key} in values replaced by key.
func parseDescriptor(s, key string) ([]entry, error) {
	var out []entry
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("load: descriptor %q: want key=value[,key=value...]", s)
		}
		out = append(out, entry{k, strings.ReplaceAll(v, "{key}", key)})
	}
	return out, nil
}

// loopback checks that host is, or resolves only to, loopback addresses.
func loopback(ctx context.Context, host string) error {
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsLoopback() {
			return fmt.Errorf("%w: %s", ErrNotLoopback, host)
		}
		return nil
	}
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return fmt.Errorf("load: resolving %s: %w", host, err)
	}
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			return fmt.Errorf("%w: %s resolves to %s", ErrNotLoopback, host, a.IP)
		}
	}
	if len(addrs) == 0 {
		return fmt.Errorf("%w: %s resolves to nothing", ErrNotLoopback, host)
	}
	return nil
}
