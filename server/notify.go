package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/notify"
)

// sweepEvery is how often the service looks for lapsed bans to tell of.
const sweepEvery = time.Second

// Defaults of the notify entries that differ by type.
const (
	execAttempts = 1
	execTimeout  = 30 * time.Second
)

// notifier tells of the service's bans, lifts and expiries: to the audit
// trail, always, then to the sinks of the configuration in force, whose
// queues never hold up a decision. It watches the ban registry for
// lapsed bans (claimed once per fleet on Redis and memcached).
type notifier struct {
	source  string
	clock   func() time.Time
	trail   *notify.Trail
	watcher *guard.ExpiryWatcher
	obs     *notifyMetrics
	log     *slog.Logger
	stop    context.CancelFunc
	done    chan struct{}
}

// sinkSet is the sinks of one configuration.
type sinkSet struct {
	all    []route // of guard.notify: every jail's events
	byJail map[string][]route
}

// route is a sink and what it is configured with.
type route struct {
	cfg  config.Notify
	sink *notify.Sink
}

// newNotifier returns the notifier of the bans in reg, and starts
// watching for lapsed ones; onExpire is told of each.
func newNotifier(reg guard.Registry, m *metrics, log *slog.Logger, clock func() time.Time, onExpire func(guard.Ban)) *notifier {
	host, _ := os.Hostname()
	n := &notifier{source: fmt.Sprintf("%s/%d", host, os.Getpid()), clock: clock,
		trail: notify.NewTrail(notify.TrailConfig{Logger: log}), obs: newNotifyMetrics(m.reg), log: log, done: make(chan struct{})}
	n.watcher = guard.NewExpiryWatcher(guard.ExpiryConfig{Registry: reg, OnExpire: onExpire})
	n.obs.watch(n.trail, n.watcher)
	ctx, cancel := context.WithCancel(context.Background())
	n.stop = cancel
	go func() {
		defer close(n.done)
		n.watcher.Run(ctx, sweepEvery, clock)
	}()
	return n
}

// tell writes the event of kind about b to the trail, then queues it for
// the sinks of the ban's jail and of every jail that want it.
func (n *notifier) tell(sinks *sinkSet, kind notify.Kind, b guard.Ban) {
	e := notify.NewEvent(kind, b, n.source, n.clock())
	n.trail.Add(e)
	if sinks == nil {
		return
	}
	for _, rs := range [][]route{sinks.all, sinks.byJail[b.Jail]} {
		for _, r := range rs {
			if r.cfg.Wants(string(kind)) {
				r.sink.Notify(e)
			}
		}
	}
}

// sinks builds the sinks of c, keeping those of prev whose configuration
// is unchanged (and their queues).
func (n *notifier) sinks(c *config.Config, prev *sinkSet) (*sinkSet, error) {
	kept := map[string]route{}
	for _, r := range prev.routes() {
		kept[r.cfg.Name] = r
	}
	s := &sinkSet{byJail: map[string][]route{}}
	build := func(nc config.Notify) (route, error) {
		if r, ok := kept[nc.Name]; ok && reflect.DeepEqual(r.cfg, nc) {
			return r, nil
		}
		return n.newSink(nc)
	}
	var err error
	for _, nc := range c.Guard.Notify {
		var r route
		if r, err = build(nc); err != nil {
			break
		}
		s.all = append(s.all, r)
	}
	for _, j := range c.Guard.Jails {
		if err != nil {
			break
		}
		for _, nc := range j.Notify {
			var r route
			if r, err = build(nc); err != nil {
				break
			}
			s.byJail[j.Name] = append(s.byJail[j.Name], r)
		}
	}
	if err != nil {
		s.retire(prev) // those started for nothing
		return nil, err
	}
	return s, nil
}

// newSink starts the sink of nc.
func (n *notifier) newSink(nc config.Notify) (route, error) {
	sc := notify.SinkConfig{Name: nc.Name, Queue: nc.Queue, Workers: nc.Workers, Attempts: nc.Attempts,
		Timeout: nc.Timeout, Observer: n.obs, Logger: n.log}
	var d notify.Deliverer
	var err error
	switch nc.Type {
	case config.NotifyWebhook:
		d, err = notify.NewWebhook(notify.WebhookConfig{URL: nc.URL, Secret: nc.Secret})
	case config.NotifyExec:
		d, err = notify.NewExec(nc.Argv)
		sc.Attempts = cmpOr(sc.Attempts, execAttempts)
		sc.Timeout = cmpOr(sc.Timeout, execTimeout)
	default:
		err = fmt.Errorf("unknown notify type %q", nc.Type)
	}
	if err != nil {
		return route{}, fmt.Errorf("notify %s: %w", nc.Name, err)
	}
	return route{cfg: nc, sink: notify.NewSink(d, sc)}, nil
}

func cmpOr[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// routes returns every route of s (none for nil).
func (s *sinkSet) routes() []route {
	if s == nil {
		return nil
	}
	out := append([]route(nil), s.all...)
	for _, rs := range s.byJail {
		out = append(out, rs...)
	}
	return out
}

// retire closes, in the background, the sinks of s that next does not
// keep, letting each deliver what it holds for up to a minute.
func (s *sinkSet) retire(next *sinkSet) {
	keep := map[*notify.Sink]bool{}
	for _, r := range next.routes() {
		keep[r.sink] = true
	}
	for _, r := range s.routes() {
		if !keep[r.sink] {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				r.sink.Close(ctx)
			}()
		}
	}
}

// close stops the watcher, and the sinks of s after they deliver what
// they hold, until ctx is done.
func (n *notifier) close(ctx context.Context, s *sinkSet) {
	n.stop()
	<-n.done
	var wg sync.WaitGroup
	for _, r := range s.routes() {
		wg.Go(func() { r.sink.Close(ctx) })
	}
	wg.Wait()
}

// notifyMetrics counts the sinks' outcomes, whatever reloads do to the
// sinks: a notify.Observer.
type notifyMetrics struct {
	sent, failed, dropped *prometheus.CounterVec
	reg                   *prometheus.Registry
}

func newNotifyMetrics(reg *prometheus.Registry) *notifyMetrics {
	m := &notifyMetrics{reg: reg,
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
	reg.MustRegister(m.sent, m.failed, m.dropped)
	return m
}

func (m *notifyMetrics) Sent(sink string)            { m.sent.WithLabelValues(sink).Inc() }
func (m *notifyMetrics) Failed(sink string)          { m.failed.WithLabelValues(sink).Inc() }
func (m *notifyMetrics) Dropped(sink, reason string) { m.dropped.WithLabelValues(sink, reason).Inc() }

// watch exports the sizes of the audit trail and the expiry counts.
func (m *notifyMetrics) watch(t *notify.Trail, w *guard.ExpiryWatcher) {
	m.reg.MustRegister(
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

var _ notify.Observer = (*notifyMetrics)(nil)

// sinks returns the sinks of the configuration in force (none before the
// first).
func (s *Service) sinks() *sinkSet {
	if st := s.state.Load(); st != nil {
		return st.sinks
	}
	return nil
}

func (s *Service) onLift(b guard.Ban) { s.notes.tell(s.sinks(), notify.Lift, b) }

func (s *Service) onExpire(b guard.Ban) { s.notes.tell(s.sinks(), notify.Expire, b) }

// Audit returns the audit trail's entries with Seq above after and Time
// not before since, oldest first, at most limit (see notify.Trail.Page).
func (s *Service) Audit(after uint64, since time.Time, limit int) notify.Page {
	return s.notes.trail.Page(after, since, limit)
}
