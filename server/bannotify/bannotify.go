// Package bannotify tells of the bans, lifts and expiries of sluice
// serve: to its audit trail, always, then to the sinks (webhooks and
// commands, package guard/notify) that the configuration in force names
// for every jail (guard.notify) and for the ban's own jail. A sink's
// queue never holds up a decision, and a reload keeps the sinks it does
// not change, with what they hold.
//
// A [Notifier] also watches the ban registry for lapsed bans (claimed
// once per fleet on Redis and memcached, see guard.ExpiryWatcher), and
// exports its counts to Prometheus.
package bannotify

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/notify"
)

// SweepEvery is how often a Notifier looks for lapsed bans to tell of.
const SweepEvery = time.Second

// Defaults of the notify entries that differ by type.
const (
	execAttempts = 1
	execTimeout  = 30 * time.Second
)

// Config configures a Notifier. The zero value of each field but
// Registry means its default.
type Config struct {
	// Registry holds the bans whose lapses the Notifier tells of.
	// Required.
	Registry guard.Registry
	// Registerer receives the Notifier's metrics (sinks' outcomes, the
	// audit trail's size, expiries). Default nil: none.
	Registerer prometheus.Registerer
	// Logger receives the trail's and the sinks' logs. Default
	// slog.Default().
	Logger *slog.Logger
	// Clock returns the time of events and sweeps. Default time.Now.
	Clock func() time.Time
}

// A Notifier tells of a service's bans, lifts and expiries. Create
// Notifiers with New and Close them when done; the zero value is not
// usable. A Notifier is safe for concurrent use.
type Notifier struct {
	source  string // this process, as events name it
	clock   func() time.Time
	trail   *notify.Trail
	watcher *guard.ExpiryWatcher
	obs     *observer
	log     *slog.Logger
	sinks   atomic.Pointer[Sinks] // those in force; nil before the first Use
	stop    context.CancelFunc
	done    chan struct{}
}

// New returns the Notifier of c, which watches c.Registry for lapsed
// bans every SweepEvery until Close.
func New(c Config) *Notifier {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	host, _ := os.Hostname()
	n := &Notifier{source: fmt.Sprintf("%s/%d", host, os.Getpid()), clock: c.Clock,
		trail: notify.NewTrail(notify.TrailConfig{Logger: c.Logger}), obs: newObserver(c.Registerer), log: c.Logger, done: make(chan struct{})}
	n.watcher = guard.NewExpiryWatcher(guard.ExpiryConfig{Registry: c.Registry, OnExpire: n.Expire})
	n.obs.watch(n.trail, n.watcher)
	ctx, cancel := context.WithCancel(context.Background())
	n.stop = cancel
	go func() {
		defer close(n.done)
		n.watcher.Run(ctx, SweepEvery, c.Clock)
	}()
	return n
}

// Ban tells of ban b (a jail's OnBan).
func (n *Notifier) Ban(b guard.Ban) { n.tell(notify.Ban, b) }

// Lift tells of the lift of ban b (a jail's OnLift).
func (n *Notifier) Lift(b guard.Ban) { n.tell(notify.Lift, b) }

// Expire tells of the lapse of ban b.
func (n *Notifier) Expire(b guard.Ban) { n.tell(notify.Expire, b) }

// tell writes the event of kind about b to the trail, then queues it for
// the sinks in force of every jail and of the ban's jail that want it.
func (n *Notifier) tell(kind notify.Kind, b guard.Ban) {
	e := notify.NewEvent(kind, b, n.source, n.clock())
	n.trail.Add(e)
	s := n.sinks.Load()
	if s == nil {
		return
	}
	for _, rs := range [][]route{s.all, s.byJail[b.Jail]} {
		for _, r := range rs {
			if r.cfg.Wants(string(kind)) {
				r.sink.Notify(e)
			}
		}
	}
}

// Audit returns the audit trail's entries with Seq above after and Time
// not before since, oldest first, at most limit (see notify.Trail.Page).
func (n *Notifier) Audit(after uint64, since time.Time, limit int) notify.Page {
	return n.trail.Page(after, since, limit)
}

// SinkStats returns the counts of the sink in force named name, and
// whether there is one.
func (n *Notifier) SinkStats(name string) (notify.SinkStats, bool) {
	for _, r := range n.sinks.Load().routes() {
		if r.cfg.Name == name {
			return r.sink.Stats(), true
		}
	}
	return notify.SinkStats{}, false
}

// Expiries returns the counts of the lapses the Notifier swept.
func (n *Notifier) Expiries() guard.ExpiryStats { return n.watcher.Stats() }

// Close stops watching for lapses, and stops the sinks in force after
// they deliver what they hold, until ctx is done.
func (n *Notifier) Close(ctx context.Context) {
	n.stop()
	<-n.done
	var wg sync.WaitGroup
	for _, r := range n.sinks.Load().routes() {
		wg.Go(func() { r.sink.Close(ctx) })
	}
	wg.Wait()
}
