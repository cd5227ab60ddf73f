// Package load drives a running sluice server (Envoy's gRPC API or the
// HTTP API) with concurrent requests for a bounded time or count, and
// measures throughput and latency: the engine of "sluice bench". It
// refuses targets that are not on a loopback address, so that it cannot
// be pointed at someone else's service.
package load

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	// Concurrency is how many requests are in flight at once. Default
	// DefaultConcurrency.
	Concurrency int
	// Conns is how many connections carry them: gRPC multiplexes the
	// requests over them; HTTP/1.1 opens at most Conns. Default
	// DefaultConns.
	Conns int
	// Duration bounds the run's time, Requests its count; the first bound
	// reached ends it. Default: Duration DefaultDuration, no count.
	Duration time.Duration
	Requests int64
	// Timeout bounds each request. Default 5s.
	Timeout time.Duration
	// Progress, if not nil, receives one line per second while the run
	// lasts.
	Progress io.Writer
}

// A Report is the outcome of a run.
type Report struct {
	// Requests counts the requests answered, Allowed and OverLimit their
	// verdicts, Errors those that failed (transport errors, non-200
	// answers).
	Requests, Allowed, OverLimit, Errors int64
	// Decisions counts descriptors decided: Requests times the
	// descriptors of each.
	Decisions int64
	// Elapsed is the length of the run.
	Elapsed time.Duration
	// Latency holds the latency of every answered request, in
	// microseconds.
	Latency *hdr.Histogram
	// FirstError is the first error seen, if any.
	FirstError error
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
	case "grpc":
		cl, err = newGRPC(u.Host, cfg)
	case "http":
		cl, err = newHTTP(u, cfg)
	default:
		err = fmt.Errorf("load: target scheme %q: want grpc:// or http://", u.Scheme)
	}
	if err != nil {
		return nil, err
	}
	defer cl.close()

	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var (
		next                                    atomic.Int64 // the index of the next request
		done, allowed, over, failed, latencySum atomic.Int64
		firstErr                                atomic.Pointer[error]
		mu                                      sync.Mutex
		total                                   = newHistogram()
		wg                                      sync.WaitGroup
	)
	begin := time.Now()
	end, _ := ctx.Deadline()
	stopProgress := progress(ctx, cfg.Progress, begin, &done, &over, &failed, &latencySum)
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
				key := cfg.KeyPrefix + strconv.FormatInt(i%int64(cfg.Keys), 10)
				rctx, rcancel := context.WithTimeout(ctx, cfg.Timeout)
				t0 := time.Now()
				ok, err := cl.do(rctx, key)
				lat := time.Since(t0)
				rcancel()
				if err != nil {
					if ctx.Err() != nil || !time.Now().Before(end) {
						// The run ended under this request (its own
						// deadline may fire before the run's).
						break
					}
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				_ = h.RecordValue(max(lat.Microseconds(), 1))
				latencySum.Add(int64(lat))
				done.Add(1)
				if ok {
					allowed.Add(1)
				} else {
					over.Add(1)
				}
			}
			mu.Lock()
			total.Merge(h)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(begin)
	stopProgress()
	r := &Report{
		Requests: done.Load(), Allowed: allowed.Load(), OverLimit: over.Load(), Errors: failed.Load(),
		Elapsed: elapsed, Latency: total,
	}
	r.Decisions = r.Requests * int64(max(len(cfg.Descriptors), 1))
	if e := firstErr.Load(); e != nil {
		r.FirstError = *e
	}
	return r, nil
}

// newHistogram records 1 µs to 60 s with 3 significant digits.
func newHistogram() *hdr.Histogram { return hdr.New(1, 60_000_000, 3) }

// progress writes one line per second to w until the returned function
// is called.
func progress(ctx context.Context, w io.Writer, begin time.Time, done, over, failed, latencySum *atomic.Int64) func() {
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
				d, s := done.Load(), latencySum.Load()
				mean := time.Duration(0)
				if d > lastDone {
					mean = time.Duration((s - lastSum) / (d - lastDone))
				}
				fmt.Fprintf(w, "%5.0fs  %9d req/s  mean %-9v  total %d  over-limit %d  errors %d\n",
					now.Sub(begin).Seconds(), d-lastDone, mean.Round(time.Microsecond), d, over.Load(), failed.Load())
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
	if u.Scheme == "grpc" && cfg.Domain == "" {
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
	case cfg.Concurrency < 0, cfg.Conns < 0, cfg.Keys < 0, cfg.Hits < 0, cfg.Requests < 0, cfg.Duration < 0:
		return cfg, nil, errors.New("load: counts and durations must not be negative")
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
