package rlqs

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/wire"
)

// unknownLabel labels what concerns buckets that no configured bucket
// matches: one label for them all, so that no client can create a
// series. Every other bucket label is a configured bucket's name.
const unknownLabel = "-"

// Metrics counts what a Service does, in Prometheus and for the
// dashboard, by configured bucket: the labels are bounded by the
// configuration, never by the bucket ids clients send. Its methods are
// safe for concurrent use, and do nothing on a nil *Metrics.
type Metrics struct {
	streams   prometheus.Gauge
	clients   *prometheus.GaugeVec
	assigned  *prometheus.GaugeVec
	reports   *prometheus.CounterVec
	actions   *prometheus.CounterVec
	refusals  *prometheus.CounterVec
	storeErrs *prometheus.CounterVec

	mu    sync.Mutex
	stats map[string]*wire.QuotaStats
}

// NewMetrics registers the quota metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{stats: map[string]*wire.QuotaStats{}}
	m.streams = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_quota_streams", Help: "Open RLQS streams (Envoy's Rate Limit Quota Service).",
	})
	m.clients = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_quota_clients", Help: "Bucket ids held by the open RLQS streams, by configured bucket (- for unknown ones).",
	}, []string{"bucket"})
	m.assigned = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_quota_assigned", Help: "Sum of the shares assigned to the open RLQS streams, by configured bucket, in units of its rule's rate.",
	}, []string{"bucket"})
	m.reports = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_quota_reported_total", Help: "Requests the edges reported, by configured bucket and result (allowed, denied).",
	}, []string{"bucket", "result"})
	m.actions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_quota_actions_total", Help: "Bucket actions sent, by configured bucket and action (assign, allow, deny, abandon).",
	}, []string{"bucket", "action"})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_quota_refused_total", Help: "Buckets answered with a blanket rule instead of a share, by reason (unknown, overflow, oversize, full, no-share, store, allow-list, deny-list, banned).",
	}, []string{"reason"})
	m.storeErrs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_quota_store_errors_total", Help: "Shares the store failed to divide, answered by the rule's failure policy, by configured bucket.",
	}, []string{"bucket"})
	reg.MustRegister(m.streams, m.clients, m.assigned, m.reports, m.actions, m.refusals, m.storeErrs)
	return m
}

func label(bucket string) string {
	if bucket == "" {
		return unknownLabel
	}
	return bucket
}

// stat returns the stats of bucket; its caller holds m.mu.
func (m *Metrics) stat(bucket string) *wire.QuotaStats {
	st := m.stats[bucket]
	if st == nil {
		st = &wire.QuotaStats{Bucket: bucket}
		m.stats[bucket] = st
	}
	return st
}

// stream counts a stream opened (+1) or closed (-1).
func (m *Metrics) stream(delta int) {
	if m != nil {
		m.streams.Add(float64(delta))
	}
}

// reported counts a report of allowed and denied requests.
func (m *Metrics) reported(bucket string, allowed, denied uint64) {
	if m == nil {
		return
	}
	b := label(bucket)
	m.reports.WithLabelValues(b, "allowed").Add(float64(allowed))
	m.reports.WithLabelValues(b, "denied").Add(float64(denied))
	m.mu.Lock()
	st := m.stat(b)
	st.Allowed += allowed
	st.Denied += denied
	m.mu.Unlock()
}

// sent counts the answer a, and a refusal's reason.
func (m *Metrics) sent(a answer) {
	if m == nil {
		return
	}
	b := label(a.bucket)
	m.actions.WithLabelValues(b, [...]string{assign: "assign", allowAll: "allow", denyAll: "deny"}[a.kind]).Inc()
	if a.reason != "" {
		m.refusals.WithLabelValues(a.reason).Inc()
	}
}

// abandoned counts an abandon action.
func (m *Metrics) abandoned(bucket string) {
	if m != nil {
		m.actions.WithLabelValues(label(bucket), "abandon").Inc()
	}
}

// storeFailed counts a failure of the store.
func (m *Metrics) storeFailed(bucket string) {
	if m != nil {
		m.storeErrs.WithLabelValues(label(bucket)).Inc()
	}
}

// hold moves a held bucket id from the answer before (zero: none) to
// after (zero: none) in the gauges of clients and assignments.
func (m *Metrics) hold(before, after *answer) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for sign, a := range map[int]*answer{-1: before, 1: after} {
		if a == nil {
			continue
		}
		b := label(a.bucket)
		st := m.stat(b)
		st.Clients += sign
		m.clients.WithLabelValues(b).Add(float64(sign))
		if a.kind == assign {
			st.Assigned += sign * a.rate
			m.assigned.WithLabelValues(b).Add(float64(sign * a.rate))
		} else {
			st.Blankets += sign
		}
	}
}

// Stats returns the stats of every bucket seen, sorted by name.
func (m *Metrics) Stats() []wire.QuotaStats {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]wire.QuotaStats, 0, len(m.stats))
	for _, st := range m.stats {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bucket < out[j].Bucket })
	return out
}
