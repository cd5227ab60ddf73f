package leaseapi

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
)

// maxTracked bounds the leases the metrics track per rule: beyond it, a
// grant is counted but not tracked, and the in-flight gauge undercounts.
const maxTracked = 1 << 16

// Metrics are the Prometheus metrics of the lease calls:
//
//	sluice_concurrency_in_flight{rule}                 leases this service granted, live
//	sluice_concurrency_acquires_total{rule,class,result} granted or refused (shed)
//	sluice_concurrency_releases_total{rule}            releases of live leases
//	sluice_concurrency_lease_expiries_total{rule}      leases that expired before release
//
// A refusal of the sheddable class while default and critical requests
// are granted is load shedding at work. A rising expiry count means
// holders crash, hang, or forget to release. Safe for concurrent use; a
// nil *Metrics counts nothing.
type Metrics struct {
	acquires *prometheus.CounterVec
	releases *prometheus.CounterVec
	expiries *prometheus.CounterVec
	inFlight *prometheus.Desc
	clock    func() time.Time
	seed     maphash.Seed

	mu     sync.Mutex
	leases map[string]map[lease]int64 // by rule: lease → expiry, Unix ns
}

// lease names a tracked lease by its key's hash and its ID: an ID is a
// lease only in its key's table, so that a call with the ID of a lease of
// another key (a forgery, which the store refuses) is not taken for that
// lease's expiry. The hash, not the key, so that a long key costs no
// more than a short one.
type lease struct {
	key uint64
	id  string
}

// lease returns the name of the lease id of key.
func (m *Metrics) lease(key, id string) lease {
	return lease{maphash.String(m.seed, key), id}
}

// NewMetrics returns Metrics registered with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		acquires: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_concurrency_acquires_total",
			Help: "Lease acquisitions of concurrency rules, by class, granted or refused (shed)."}, []string{"rule", "class", "result"}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_concurrency_releases_total",
			Help: "Releases of live leases of concurrency rules."}, []string{"rule"}),
		expiries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_concurrency_lease_expiries_total",
			Help: "Leases granted by this service that expired before their holder released them."}, []string{"rule"}),
		inFlight: prometheus.NewDesc("sluice_concurrency_in_flight",
			"Leases granted by this service that are live: not released, not expired.", []string{"rule"}, nil),
		clock:  time.Now,
		seed:   maphash.MakeSeed(),
		leases: map[string]map[lease]int64{},
	}
	reg.MustRegister(m.acquires, m.releases, m.expiries, m)
	return m
}

// Describe implements prometheus.Collector for the in-flight gauge.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.inFlight }

// Collect implements prometheus.Collector: it counts the expired leases
// and reports the live ones.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock().UnixNano()
	for rule, t := range m.leases {
		m.sweep(rule, t, now)
		ch <- prometheus.MustNewConstMetric(m.inFlight, prometheus.GaugeValue, float64(len(t)), rule)
	}
}

// sweep drops the expired leases of rule's table t, counting them.
func (m *Metrics) sweep(rule string, t map[lease]int64, now int64) {
	for k, exp := range t {
		if exp <= now {
			delete(t, k)
			m.expiries.WithLabelValues(rule).Inc()
		}
	}
}

func (m *Metrics) acquired(rule, key string, cl sluice.Class, res Result) {
	if m == nil {
		return
	}
	result := "refused"
	if res.OK {
		result = "granted"
	}
	m.acquires.WithLabelValues(rule, cl.String(), result).Inc()
	if !res.OK {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.leases[rule]
	if t == nil {
		t = map[lease]int64{}
		m.leases[rule] = t
	}
	if len(t) >= maxTracked {
		m.sweep(rule, t, m.clock().UnixNano())
	}
	if len(t) < maxTracked {
		t[m.lease(key, res.ID)] = res.Expires.UnixNano()
	}
}

func (m *Metrics) released(rule, key, id string, live bool) {
	if m == nil {
		return
	}
	if live {
		m.releases.WithLabelValues(rule).Inc()
	}
	m.forget(rule, m.lease(key, id), !live)
}

func (m *Metrics) extended(rule, key, id string, d sluice.LeaseDecision) {
	if m == nil {
		return
	}
	if !d.Allowed {
		m.forget(rule, m.lease(key, id), true)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, l := m.leases[rule], m.lease(key, id)
	if _, ok := t[l]; ok {
		t[l] = d.Expires.UnixNano()
	}
}

// forget drops a tracked lease, counting it as expired if it was.
func (m *Metrics) forget(rule string, l lease, expired bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.leases[rule]
	if _, ok := t[l]; !ok {
		return
	}
	delete(t, l)
	if expired {
		m.expiries.WithLabelValues(rule).Inc()
	}
}
