package bannotify

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/notify"
)

// observer counts the sinks' outcomes, whatever reloads do to the sinks:
// a notify.Observer.
type observer struct {
	sent, failed, dropped *prometheus.CounterVec
	reg                   prometheus.Registerer // nil: none
}

var _ notify.Observer = (*observer)(nil)

func newObserver(reg prometheus.Registerer) *observer {
	o := &observer{reg: reg,
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_notifications_sent_total", Help: "Ban notifications delivered, by sink.",
		}, []string{"sink"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_notifications_failed_total", Help: "Attempts to deliver a ban notification that failed (some are retried), by sink.",
		}, []string{"sink"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_notifications_dropped_total", Help: "Ban notifications given up, by sink and reason (queue_full: never tried; attempts: every attempt failed; closed: shutdown or reload).",
		}, []string{"sink", "reason"}),
	}
	if reg != nil {
		reg.MustRegister(o.sent, o.failed, o.dropped)
	}
	return o
}

func (o *observer) Sent(sink string)            { o.sent.WithLabelValues(sink).Inc() }
func (o *observer) Failed(sink string)          { o.failed.WithLabelValues(sink).Inc() }
func (o *observer) Dropped(sink, reason string) { o.dropped.WithLabelValues(sink, reason).Inc() }

// watch exports the sizes of the audit trail and the expiry counts.
func (o *observer) watch(t *notify.Trail, w *guard.ExpiryWatcher) {
	if o.reg == nil {
		return
	}
	o.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_audit_entries", Help: "Events held by the audit trail (GET /admin/api/audit).",
		}, func() float64 { held, _ := t.Len(); return float64(held) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_audit_evicted_total", Help: "Events the audit trail dropped, oldest first, to stay within its bounds.",
		}, func() float64 { _, ev := t.Len(); return float64(ev) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_ban_expiries_total", Help: "Lapsed bans this process claimed and told of (another process of a fleet tells of the others).",
		}, func() float64 { return float64(w.Stats().Told) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_ban_expiries_lost_total", Help: "Lapsed bans never told of: more lapsed between two sweeps than kept, or their claim kept failing.",
		}, func() float64 { return float64(w.Stats().Lost) }),
	)
}
