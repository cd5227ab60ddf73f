package bannotify

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard/notify"
)

// Sinks are the sinks of one configuration: built by Notifier.Sinks, put
// in force by Notifier.Use.
type Sinks struct {
	all    []route // of guard.notify: every jail's events
	byJail map[string][]route
}

// route is a sink and what it is configured with.
type route struct {
	cfg  config.Notify
	sink *notify.Sink
}

// Sinks builds the sinks of configuration c, keeping those in force
// whose configuration is unchanged (with their queues) and starting the
// others. If it fails it stops those it started.
func (n *Notifier) Sinks(c *config.Config) (*Sinks, error) {
	prev := n.sinks.Load()
	kept := map[string]route{}
	for _, r := range prev.routes() {
		kept[r.cfg.Name] = r
	}
	s := &Sinks{byJail: map[string][]route{}}
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

// Use puts s in force, and closes in the background the sinks of the
// set it replaces that s does not keep, letting each deliver what it
// holds for up to a minute.
func (n *Notifier) Use(s *Sinks) {
	if old := n.sinks.Swap(s); old != nil {
		old.retire(s)
	}
}

// newSink starts the sink of nc.
func (n *Notifier) newSink(nc config.Notify) (route, error) {
	sc := notify.SinkConfig{Name: nc.Name, Queue: nc.Queue, Workers: nc.Workers, Attempts: nc.Attempts,
		Timeout: nc.Timeout, Observer: n.obs, Logger: n.log}
	var d notify.Deliverer
	var err error
	switch nc.Type {
	case config.NotifyWebhook:
		d, err = notify.NewWebhook(notify.WebhookConfig{URL: nc.URL, Secret: nc.Secret})
	case config.NotifyExec:
		d, err = notify.NewExec(nc.Argv)
		sc.Attempts = orDefault(sc.Attempts, execAttempts)
		sc.Timeout = orDefault(sc.Timeout, execTimeout)
	default:
		err = fmt.Errorf("unknown notify type %q", nc.Type)
	}
	if err != nil {
		return route{}, fmt.Errorf("notify %s: %w", nc.Name, err)
	}
	return route{cfg: nc, sink: notify.NewSink(d, sc)}, nil
}

// orDefault returns v if it is set (positive), else def.
func orDefault[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// routes returns every route of s (none for nil).
func (s *Sinks) routes() []route {
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
func (s *Sinks) retire(next *Sinks) {
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
