package server

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/httpstatus"
	"github.com/sluicehq/sluice/store/fallback"
)

// Label values of sluice_decisions_total.
var (
	opLabels     = [...]string{sluice.OpTake: "take", sluice.OpPeek: "peek", sluice.OpRefund: "refund", sluice.OpReset: "reset"}
	resultLabels = [...]string{"allowed", "denied", "error"}
)

// otherRule labels the decisions of limiters that belong to no rule of
// the configuration (jails, readiness probes): one label for them all,
// so that no request can create a series.
const otherRule = "-"

// metrics holds the Prometheus collectors of a Service. Every label has a
// bounded set of values (rules, ops, results, handlers, status codes):
// nothing is labelled by key.
type metrics struct {
	reg         *prometheus.Registry
	decisions   *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	storeErrors prometheus.Counter
	breakerOpen *prometheus.GaugeVec
	reloads     *prometheus.CounterVec
	lastReload  prometheus.Gauge
	bans        *prometheus.CounterVec
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
}

// latencyBuckets run from 25µs to about 0.8s: a decision on the memory
// store takes microseconds, on a shared store a round trip.
var latencyBuckets = prometheus.ExponentialBuckets(25e-6, 2, 16)

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_decisions_total",
		Help: "Decisions of the store by rule, operation and result (allowed, denied, error).",
	}, []string{"rule", "op", "result"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_decision_duration_seconds",
		Help:    "Time the store took to decide, by rule, failure policy included.",
		Buckets: latencyBuckets,
	}, []string{"rule"})
	m.storeErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_store_errors_total",
		Help: "Failures of the shared store (errors and timeouts); each was answered by the rule's failure policy.",
	})
	m.breakerOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_store_breaker_open",
		Help: "1 while the circuit breaker of a store (or memcached server) and policy is open.",
	}, []string{"store", "policy"})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_config_reloads_total",
		Help: "Configuration reloads by result (success, failure).",
	}, []string{"result"})
	m.lastReload = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_config_last_reload_success_timestamp_seconds",
		Help: "Unix time of the last configuration loaded.",
	})
	m.bans = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_bans_total",
		Help: "Bans made, by jail (by the jail's rules or by an admin).",
	}, []string{"jail"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_http_requests_total",
		Help: "HTTP requests by handler and status code.",
	}, []string{"handler", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_http_request_duration_seconds",
		Help:    "Time to answer HTTP requests, by handler.",
		Buckets: latencyBuckets,
	}, []string{"handler"})
	m.reg.MustRegister(m.decisions, m.latency, m.storeErrors, m.breakerOpen, m.reloads, m.lastReload,
		m.bans, m.requests, m.duration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// breaker records the state of a breaker.
func (m *metrics) breaker(store, policy string, open bool) {
	v := 0.0
	if open {
		v = 1
	}
	m.breakerOpen.WithLabelValues(store, policy).Set(v)
}

// watchFallback exports the counters of a fallback Store.
func (m *metrics) watchFallback(store, policy string, f *fallback.Store) {
	m.breaker(store, policy, false)
	labels := prometheus.Labels{"store": store, "policy": policy}
	// A second fallback of the same store and policy (a memcached server
	// listed twice) would collide; its counters are then left out.
	_ = m.reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "sluice_store_degraded_total", Help: "Requests answered by the failure policy while the store failed.",
		ConstLabels: labels,
	}, func() float64 { return float64(f.Stats().Degraded) }))
	_ = m.reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "sluice_store_replayed_total", Help: "Local takes replayed into the store after it came back.",
		ConstLabels: labels,
	}, func() float64 { return float64(f.Stats().Replayed) }))
}

// ruleMetrics are the collectors of one rule, resolved once so that a
// decision costs no label lookup.
type ruleMetrics struct {
	name    string
	counts  [len(opLabels)][len(resultLabels)]prometheus.Counter
	latency prometheus.Observer
}

func (m *metrics) rule(name string) *ruleMetrics {
	r := &ruleMetrics{name: name, latency: m.latency.WithLabelValues(name)}
	for op, ol := range opLabels {
		for res, rl := range resultLabels {
			r.counts[op][res] = m.decisions.WithLabelValues(name, ol, rl)
		}
	}
	return r
}

// meterTable maps the prefixes of the rules' limiters to their metrics.
type meterTable struct {
	byPrefix map[string]*ruleMetrics
	other    *ruleMetrics
}

// A meter is a sluice.Store that counts and times the decisions of the
// store under it by rule, and keeps the latest denials for the dashboard.
type meter struct {
	next    sluice.Store
	m       *metrics
	table   atomic.Pointer[meterTable]
	denials denialLog
}

func newMeter(next sluice.Store, m *metrics) *meter {
	mt := &meter{next: next, m: m}
	mt.table.Store(&meterTable{byPrefix: map[string]*ruleMetrics{}, other: m.rule(otherRule)})
	mt.denials.max = 100
	return mt
}

// setRules names the rules and domains of c whose decisions are counted
// under their own label, by the prefixes of their states.
func (mt *meter) setRules(c *config.Config, namespace string) {
	t := &meterTable{byPrefix: map[string]*ruleMetrics{}, other: mt.m.rule(otherRule)}
	for _, name := range ruleNames(c) {
		for _, p := range prefixes(c, namespace, name) {
			t.byPrefix[p] = mt.m.rule(name)
		}
	}
	mt.table.Store(t)
}

func (mt *meter) Decide(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
	t := mt.table.Load()
	start := time.Now()
	d, err := mt.next.Decide(ctx, r)
	mt.record(t, &r, d, err, start, time.Since(start))
	return d, err
}

// DecideBatch decides rs in one call of the store under it when that
// store can batch (one round trip on Redis), else one Decide each, and
// counts each request as Decide does; each is timed as the whole batch.
func (mt *meter) DecideBatch(ctx context.Context, rs []sluice.Request) ([]sluice.Decision, []error) {
	b, ok := mt.next.(batcher)
	if !ok {
		return decideEach(ctx, mt, rs)
	}
	t := mt.table.Load()
	start := time.Now()
	ds, errs := b.DecideBatch(ctx, rs)
	took := time.Since(start)
	for i := range rs {
		mt.record(t, &rs[i], ds[i], errs[i], start, took)
	}
	return ds, errs
}

// record counts and times the decision d, err of r, asked at start.
func (mt *meter) record(t *meterTable, r *sluice.Request, d sluice.Decision, err error, start time.Time, took time.Duration) {
	rm, ok := t.byPrefix[r.Prefix]
	if !ok {
		rm = t.other
	}
	rm.latency.Observe(took.Seconds())
	res := 0
	switch {
	case err != nil:
		res = 2
	case !d.Allowed:
		res = 1
		if r.Op == sluice.OpTake && ok {
			mt.denials.add(Denial{Time: start, Rule: rm.name, Key: r.Key, RetryAfter: d.RetryAfter})
		}
	}
	if int(r.Op) < len(opLabels) {
		rm.counts[r.Op][res].Inc()
	}
}

// batcher is the optional capability of a store to decide many requests
// in one call (store/redis: one round trip), which the rules engine uses
// for the descriptors of a request. Every layer of the service's store
// has it, so that it reaches the primary store.
type batcher interface {
	DecideBatch(ctx context.Context, rs []sluice.Request) ([]sluice.Decision, []error)
}

// decideEach is DecideBatch for a layer whose store cannot batch: one
// Decide of s per request.
func decideEach(ctx context.Context, s sluice.Store, rs []sluice.Request) ([]sluice.Decision, []error) {
	ds, errs := make([]sluice.Decision, len(rs)), make([]error, len(rs))
	for i, r := range rs {
		ds[i], errs[i] = s.Decide(ctx, r)
	}
	return ds, errs
}

// A Denial is a request a rule denied, as the dashboard lists it.
type Denial struct {
	Time       time.Time
	Rule       string
	Key        string
	RetryAfter time.Duration
}

// denialLog keeps the latest denials, up to max.
type denialLog struct {
	mu   sync.Mutex
	max  int
	ring []Denial
	next int
}

func (l *denialLog) add(d Denial) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ring) < l.max {
		l.ring = append(l.ring, d)
		return
	}
	l.ring[l.next] = d
	l.next = (l.next + 1) % l.max
}

// list returns the denials kept, the latest first.
func (l *denialLog) list() []Denial {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Denial, 0, len(l.ring))
	for i := range l.ring {
		out = append(out, l.ring[(l.next+len(l.ring)-1-i)%len(l.ring)])
	}
	return out
}

// instrument counts and times the requests of h under the label handler.
func (m *metrics) instrument(handler string, h http.Handler) http.Handler {
	obs := m.duration.WithLabelValues(handler)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &httpstatus.Writer{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		obs.Observe(time.Since(start).Seconds())
		m.requests.WithLabelValues(handler, strconv.Itoa(sw.Code())).Inc()
	})
}
