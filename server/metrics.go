package server

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/httpstatus"
	"github.com/sluicehq/sluice/internal/topkeys"
	"github.com/sluicehq/sluice/server/admin"
	"github.com/sluicehq/sluice/store/fallback"
)

// Label values of sluice_decisions_total.
var (
	opLabels     = [...]string{sluice.OpTake: "take", sluice.OpPeek: "peek", sluice.OpRefund: "refund", sluice.OpReset: "reset", sluice.OpInsert: "insert"}
	resultLabels = [...]string{"allowed", "denied", "error", "estimated"}
)

// jailsRule labels the decisions of the jails' limiters (failures and
// offences): one label for them all, so that no request can create a
// series.
const jailsRule = "-"

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
	strikesLost *prometheus.CounterVec
	lostMu      sync.Mutex
	lost        map[string]map[string]uint64 // strikesLost's counts, by jail and reason, for the dashboard
	guard       *prometheus.CounterVec
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec

	openMu sync.Mutex
	open   map[breakerOf]bool // breakers by store and policy: open or not
}

// latencyBuckets run from 25µs to about 0.8s: a decision on the memory
// store takes microseconds, on a shared store a round trip.
var latencyBuckets = prometheus.ExponentialBuckets(25e-6, 2, 16)

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), open: map[breakerOf]bool{}}
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_decisions_total",
		Help: "Decisions of the store by rule, operation and result (allowed, denied, error; estimated: denied by a memory store at its cap that forgot the actor, no jail strike).",
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
	m.strikesLost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_jail_strikes_lost_total",
		Help: "Failures a jail was told of that it did not count (estimated: the denial was a memory store's estimate; store-error: its store failed) or counted without those before (forgotten: its memory store had forgotten them), by jail and reason.",
	}, []string{"jail", "reason"})
	m.guard = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_guard_total",
		Help: "Requests the guard decided before the limits, by rule and action (allow-list, deny-list, banned).",
	}, []string{"rule", "action"})
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
		m.bans, m.strikesLost, m.guard, m.requests, m.duration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// watchBans exports the size of the ban set the service enforces from.
func (m *metrics) watchBans(set *guard.BanSet) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_bans_active", Help: "Bans held by the ban registry (in force, or lapsed and not yet dropped).",
		}, func() float64 { return float64(set.Stats().Bans) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_bans_capacity", Help: "Bans the ban registry holds at most.",
		}, func() float64 { return float64(set.Stats().Max) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_bans_coarsened_total", Help: "Bans merged into a network ban because the registry was at capacity.",
		}, func() float64 { return float64(set.Stats().Coarsened) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_bans_refused_total", Help: "Bans of addresses and networks refused because their share of the registry was full and nothing could merge within the bounds.",
		}, func() float64 { return float64(set.Stats().Refused) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_bans_key_refused_total", Help: "Bans of keys that are no address (usernames) refused because their share of the registry (guard.max_key_bans) was full.",
		}, func() float64 { return float64(set.Stats().RefusedKeys) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_bans_key_active", Help: "Bans of keys that are no address held by the ban registry.",
		}, func() float64 { return float64(set.Stats().Keys) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_bans_collateral", Help: "What the bans merged at capacity cover beyond their offenders: IPv4 addresses, IPv6 /64s.",
			ConstLabels: prometheus.Labels{"family": "ipv4"},
		}, func() float64 { return float64(set.Stats().CollateralIPv4) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_bans_collateral", Help: "What the bans merged at capacity cover beyond their offenders: IPv4 addresses, IPv6 /64s.",
			ConstLabels: prometheus.Labels{"family": "ipv6"},
		}, func() float64 { return float64(set.Stats().CollateralIPv6) }),
	)
}

// watchIPv6 exports the counts of forward-auth's adaptive IPv6 keys, as
// stats returns them for the configuration in force (a reload starts
// them again, as a restart does).
func (m *metrics) watchIPv6(stats func() httplimit.AdaptiveStats) {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_ipv6_subnet_grants_total", Help: "IPv6 /64s keyed by themselves by forward_auth.ipv6_adaptive (grants taken).",
		}, func() float64 { return float64(stats().Granted) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_ipv6_site_shared_total", Help: "Requests keyed by their /48 by forward_auth.ipv6_adaptive, the /48 having rotated through more /64s than it is granted.",
		}, func() float64 { return float64(stats().Shared) }),
	)
}

// strikeLost counts a failure jail lost, for why.
func (m *metrics) strikeLost(jail string, why guard.StrikeLoss) {
	m.strikesLost.WithLabelValues(jail, why.String()).Inc()
	m.lostMu.Lock()
	defer m.lostMu.Unlock()
	if m.lost == nil {
		m.lost = map[string]map[string]uint64{}
	}
	if m.lost[jail] == nil {
		m.lost[jail] = map[string]uint64{}
	}
	m.lost[jail][why.String()]++
}

// strikesLostByJail returns what strikeLost counted, by jail in name
// order: jails are a configuration's, and reasons three.
func (m *metrics) strikesLostByJail() []admin.JailLive {
	m.lostMu.Lock()
	defer m.lostMu.Unlock()
	out := make([]admin.JailLive, 0, len(m.lost))
	for jail, by := range m.lost {
		out = append(out, admin.JailLive{Name: jail, StrikesLost: maps.Clone(by)})
	}
	slices.SortFunc(out, func(a, b admin.JailLive) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// breakerOf names the breaker of a store (or memcached server) and a
// failure policy.
type breakerOf struct {
	store  string
	policy sluice.FailurePolicy
}

// breaker records the state of a breaker.
func (m *metrics) breaker(store string, policy sluice.FailurePolicy, open bool) {
	v := 0.0
	if open {
		v = 1
	}
	m.breakerOpen.WithLabelValues(store, policy.String()).Set(v)
	m.openMu.Lock()
	m.open[breakerOf{store, policy}] = open
	m.openMu.Unlock()
}

// breakersOpen returns how many breakers of failure policy are open.
func (m *metrics) breakersOpen(policy sluice.FailurePolicy) int {
	m.openMu.Lock()
	defer m.openMu.Unlock()
	n := 0
	for k, open := range m.open {
		if open && k.policy == policy {
			n++
		}
	}
	return n
}

// watchFallback exports the counters of a fallback Store.
func (m *metrics) watchFallback(store string, policy sluice.FailurePolicy, f *fallback.Store) {
	m.breaker(store, policy, false)
	labels := prometheus.Labels{"store": store, "policy": policy.String()}
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
	guard   [guard.Banned + 1]prometheus.Counter // by guard.Action; none for Pass
	latency prometheus.Observer
}

func (m *metrics) rule(name string) *ruleMetrics {
	r := &ruleMetrics{name: name, latency: m.latency.WithLabelValues(name)}
	for op, ol := range opLabels {
		for res, rl := range resultLabels {
			r.counts[op][res] = m.decisions.WithLabelValues(name, ol, rl)
		}
	}
	for _, a := range []guard.Action{guard.Exempt, guard.Refuse, guard.Banned} {
		r.guard[a] = m.guard.WithLabelValues(name, a.String())
	}
	return r
}

// A meter is the store of one rule (a named rule, a domain, or the jails):
// it counts and times the decisions of the store under it, and keeps the
// rule's latest denials for the dashboard. It is a sluice.Batcher, so
// that the descriptors of a request reach the store in one batch.
type meter struct {
	next    sluice.Store
	rm      *ruleMetrics
	denials *denialLog      // nil: denials not kept
	top     *topkeys.Window // the rule's most denied keys; nil: not tracked
	tracer  trace.Tracer    // nil: no spans
}

var (
	_ sluice.Batcher = (*meter)(nil)
	_ sluice.Binder  = (*meter)(nil)
)

func (mt *meter) Decide(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
	return mt.decide(ctx, &r, nil)
}

// decide decides r through b, a Bound of the store under the meter of
// r's prefix and limits, or if nil through the store's Decide, and
// counts and times it.
func (mt *meter) decide(ctx context.Context, r *sluice.Request, b sluice.Bound) (sluice.Decision, error) {
	if mt.tracer != nil {
		var span trace.Span
		ctx, span = mt.span(ctx, "sluice.store.decide", 1)
		defer span.End()
	}
	start := time.Now()
	var d sluice.Decision
	var err error
	if b != nil {
		d, err = b.Decide(ctx, r.Key, r.Op, r.Cost, r.Now)
	} else {
		d, err = mt.next.Decide(ctx, *r)
	}
	mt.record(r, d, err, start, time.Since(start))
	if err != nil && mt.tracer != nil {
		failed(ctx, err)
	}
	return d, err
}

// Bind binds the store under the meter, when it is a sluice.Binder (the
// memory store), and returns a Bound that meters its decisions as Decide
// does: so that the rules engine's checks on the memory store take the
// store's bound way (a held key decided in place) under the meter too.
// See sluice.Binder for as.
func (mt *meter) Bind(as sluice.Store, prefix string, limits []sluice.Limit) (sluice.Bound, error) {
	next, ok := mt.next.(sluice.Binder)
	if m, isMeter := as.(*meter); !ok || !isMeter || m != mt {
		return nil, nil
	}
	b, err := next.Bind(mt.next, prefix, limits)
	if b == nil || err != nil {
		return nil, err
	}
	return &meteredBound{mt: mt, b: b, prefix: prefix, limits: limits}, nil
}

// A meteredBound is a meter's Bound: the store's, counted and timed.
type meteredBound struct {
	mt     *meter
	b      sluice.Bound
	prefix string
	limits []sluice.Limit
}

func (mb *meteredBound) Decide(ctx context.Context, key string, op sluice.Op, cost int, now time.Time) (sluice.Decision, error) {
	r := sluice.Request{Prefix: mb.prefix, Key: key, Limits: mb.limits, Op: op, Cost: cost, Now: now}
	return mb.mt.decide(ctx, &r, mb.b)
}

// failed marks the span of ctx failed with err.
func failed(ctx context.Context, err error) {
	span := trace.SpanFromContext(ctx)
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// DecideBatch decides rs in one call of the store under it when that
// store can batch (one round trip on Redis), else one Decide each, and
// counts each request as Decide does; each is timed as the whole batch.
func (mt *meter) DecideBatch(ctx context.Context, rs []sluice.Request) ([]sluice.Decision, []error) {
	if mt.tracer != nil {
		var span trace.Span
		ctx, span = mt.span(ctx, "sluice.store.decide_batch", len(rs))
		defer span.End()
	}
	start := time.Now()
	ds, errs := sluice.DecideBatch(ctx, mt.next, rs)
	took := time.Since(start)
	for i := range rs {
		mt.record(&rs[i], ds[i], errs[i], start, took)
		if errs[i] != nil && mt.tracer != nil {
			failed(ctx, errs[i])
		}
	}
	return ds, errs
}

// span starts a span of a call of the store for the rule, of n requests.
func (mt *meter) span(ctx context.Context, name string, n int) (context.Context, trace.Span) {
	return mt.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("sluice.rule", mt.rm.name), attribute.Int("sluice.requests", n)))
}

// record counts and times the decision d, err of r, asked at start.
func (mt *meter) record(r *sluice.Request, d sluice.Decision, err error, start time.Time, took time.Duration) {
	mt.rm.latency.Observe(took.Seconds())
	res := 0
	switch {
	case err != nil:
		res = 2
	case !d.Allowed:
		res = 1
		if d.Estimated {
			res = 3
		}
		if r.Op == sluice.OpTake {
			mt.denied(r, d, start)
		}
	}
	if int(r.Op) < len(opLabels) {
		mt.rm.counts[r.Op][res].Inc()
	}
}

// denied keeps the denial d of r, asked at start, for the dashboard: in
// the latest denials, and counted in the rule's top keys.
func (mt *meter) denied(r *sluice.Request, d sluice.Decision, start time.Time) {
	if mt.denials != nil {
		mt.denials.add(Denial{Time: start, Rule: mt.rm.name, Key: r.Key, RetryAfter: d.RetryAfter})
	}
	if mt.top != nil {
		at := r.Now
		if at.IsZero() {
			at = start
		}
		mt.top.Add(at, r.Key)
	}
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
		h.ServeHTTP(sw.Wrap(), r)
		obs.Observe(time.Since(start).Seconds())
		m.requests.WithLabelValues(handler, strconv.Itoa(sw.Code())).Inc()
	})
}
