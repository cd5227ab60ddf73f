package server

import (
	"context"
	"log/slog"
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/topkeys"
	"github.com/sluicehq/sluice/server/admin"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/wire"
)

const (
	// liveSeconds is how many seconds of rates the dashboard charts.
	liveSeconds = 300
	// liveTop is how many of its most denied keys per rule it lists.
	liveTop = 10
	// liveTick is how often it samples the rates and pushes a snapshot.
	liveTick = time.Second
	// liveCalls bounds the store calls that look up the state of the top
	// keys, each second.
	liveCalls = 2 * time.Second / 3
)

// live is what the dashboard shows as it happens: the take decisions per
// second of each rule (read from its Prometheus counters, never counted
// twice) over the last liveSeconds, and the keys each rule denied most
// over the last minute (counted by the rule's meter, in a
// topkeys.Window). It samples them every liveTick, from start to close,
// and only while a dashboard streams builds a Snapshot, once for all of
// them, with the bans and the state of the top keys.
type live struct {
	feed    *admin.Feed
	m       *metrics
	state   func() *state                             // the configuration in force
	bans    func(context.Context) ([]wire.Ban, error) // the bans in force
	quota   func() []wire.QuotaStats                  // the edge quotas' buckets; nil: none
	clock   func() time.Time
	log     *slog.Logger
	stop    context.CancelFunc // stops sampling
	stopped chan struct{}      // closed when sampling stopped

	mu      sync.Mutex
	last    time.Time                  // of the latest sample
	times   []int64                    // Unix seconds of the samples, oldest first
	rules   []*liveRule                // of the configuration in force, in its order
	windows map[string]*topkeys.Window // by scope, kept across reloads
}

// liveRule is the series of one scope (a named rule or a domain).
type liveRule struct {
	name    string
	mode    string
	policy  sluice.FailurePolicy
	taken   [len(resultLabels)]prometheus.Counter
	prev    [len(resultLabels)]float64 // their values at the latest sample
	errs    float64                    // errors in the latest sample
	allowed []float64
	denied  []float64
	top     *topkeys.Window
}

// newLive returns the dashboard's series of the scopes of the metrics m,
// none yet, to sample from start.
func newLive(m *metrics, state func() *state, bans func(context.Context) ([]wire.Ban, error), clock func() time.Time, log *slog.Logger) *live {
	return &live{feed: admin.NewFeed(), m: m, state: state, bans: bans, clock: clock, log: log,
		last: clock(), windows: map[string]*topkeys.Window{}}
}

// window returns the top keys of scope, made on first use.
func (l *live) window(scope string) *topkeys.Window {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.windows[scope]
	if w == nil {
		w = topkeys.NewWindow(topkeys.WindowConfig{})
		l.windows[scope] = w
	}
	return w
}

// use makes the scopes of st the ones sampled, keeping the series of
// those it had and dropping the windows of the others.
func (l *live) use(st *state) {
	modes := scopeModes(st.engine.Rules())
	l.mu.Lock()
	defer l.mu.Unlock()
	had := map[string]*liveRule{}
	for _, r := range l.rules {
		had[r.name] = r
	}
	l.rules = l.rules[:0:0]
	kept := map[string]*topkeys.Window{}
	for _, name := range scopes(st.cfg) {
		r := had[name]
		if r == nil {
			r = l.newRule(name)
		}
		r.mode, r.policy = modes[name], st.policies[name]
		kept[name] = r.top
		l.rules = append(l.rules, r)
	}
	l.windows = kept
}

// newRule starts the series of scope, as zeros up to now. l.mu is held.
func (l *live) newRule(scope string) *liveRule {
	rm := l.m.rule(scope)
	r := &liveRule{name: scope, allowed: make([]float64, len(l.times)), denied: make([]float64, len(l.times)), top: l.windows[scope]}
	if r.top == nil {
		r.top = topkeys.NewWindow(topkeys.WindowConfig{})
	}
	for i := range r.taken {
		r.taken[i] = rm.counts[sluice.OpTake][i]
		r.prev[i] = counterValue(r.taken[i])
	}
	return r
}

// scopeModes returns the mode of each scope: "shadow" when all its rules
// are, "enforce" when none is, else "mixed".
func scopeModes(rs []*rules.Rule) map[string]string {
	modes := map[string]string{}
	for _, ru := range rs {
		m := "enforce"
		if ru.Shadow {
			m = "shadow"
		}
		if old, ok := modes[scopeOf(ru)]; ok && old != m {
			m = "mixed"
		}
		modes[scopeOf(ru)] = m
	}
	return modes
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}

// sample appends to each series the rates since the previous sample.
func (l *live) sample(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	secs := now.Sub(l.last).Seconds()
	if secs <= 0 {
		return
	}
	l.last = now
	l.times = push(l.times, now.Unix())
	for _, r := range l.rules {
		var cur [len(resultLabels)]float64
		for i, c := range r.taken {
			cur[i] = counterValue(c)
		}
		d := func(i int) float64 { return cur[i] - r.prev[i] }
		r.allowed = push(r.allowed, rate(d(0), secs))
		r.denied = push(r.denied, rate(d(1)+d(3), secs)) // denied, and estimated denials
		r.errs = d(2)
		r.prev = cur
	}
}

// push appends v to the series s, keeping its latest liveSeconds.
func push[T any](s []T, v T) []T {
	s = append(s, v)
	if len(s) > liveSeconds {
		s = s[len(s)-liveSeconds:]
	}
	return s
}

// rate returns n events in secs seconds per second, to 0.1.
func rate(n, secs float64) float64 { return math.Round(n/secs*10) / 10 }

// snapshot copies the series and top keys at now into a Snapshot; the
// keys' states and the bans are for the Service to fill.
func (l *live) snapshot(now time.Time) *admin.Snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &admin.Snapshot{Time: now, Times: append([]int64(nil), l.times...), Rules: make([]admin.RuleLive, len(l.rules))}
	for i, r := range l.rules {
		rl := admin.RuleLive{Name: r.name, Mode: r.mode, Health: l.health(r),
			Allowed: append([]float64(nil), r.allowed...), Denied: append([]float64(nil), r.denied...),
			TopWindow: int(r.top.Span() / time.Second)}
		top, _ := r.top.Top(now, liveTop)
		for _, c := range top {
			rl.Top = append(rl.Top, admin.TopKey{Key: c.Key, Denials: c.Count, Error: c.Err, State: "unknown"})
		}
		s.Rules[i] = rl
	}
	return s
}

// health tells the state of r's store: failing while a breaker of its
// policy is open (only a shared store's open and local policies have
// breakers), errors when decisions failed in the latest sample.
func (l *live) health(r *liveRule) string {
	switch {
	case l.m.breakersOpen(r.policy) > 0:
		return "failing"
	case r.errs > 0:
		return "errors"
	}
	return "ok"
}

// start samples the series of the configuration in force every
// liveTick, and pushes a snapshot while a dashboard streams, until close.
func (l *live) start() {
	l.use(l.state())
	ctx, stop := context.WithCancel(context.Background())
	l.stop, l.stopped = stop, make(chan struct{})
	go func() {
		defer close(l.stopped)
		t := time.NewTicker(liveTick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				l.tick(ctx, l.clock())
			}
		}
	}()
}

// close stops sampling, and ends the dashboards' streams.
func (l *live) close() {
	if l.stop != nil {
		l.stop()
		<-l.stopped
	}
	l.feed.Close()
}

// tick takes the sample of now and, while a dashboard streams,
// publishes the snapshot of now.
func (l *live) tick(ctx context.Context, now time.Time) {
	l.sample(now)
	if !l.feed.Watched() {
		return
	}
	snap := l.snapshot(now)
	ctx, cancel := context.WithTimeout(ctx, liveCalls)
	defer cancel()
	bans, err := l.bans(ctx)
	if err != nil {
		snap.BansError = "the store failed; bans cannot be listed now"
	}
	snap.BansTotal = len(bans)
	snap.Bans = bans[:min(len(bans), admin.MaxSnapshotBans)]
	snap.Jails = l.m.strikesLostByJail()
	if l.quota != nil {
		snap.Quota = l.quota()
	}
	l.keyStates(ctx, snap, bans)
	if err := l.feed.Publish(snap); err != nil {
		l.log.Warn("dashboard snapshot", "err", err)
	}
}

// keyStates fills in the state of each top key: banned, else what a
// peek of its named rule says (a domain's keys stay unknown).
func (l *live) keyStates(ctx context.Context, snap *admin.Snapshot, bans []wire.Ban) {
	st := l.state()
	for i := range snap.Rules {
		r := &snap.Rules[i]
		_, named := st.cfg.Rule(r.Name)
		for j := range r.Top {
			t := &r.Top[j]
			if b := banOf(bans, t.Key); b != nil {
				t.State, t.Ban = "banned", b
				continue
			}
			if !named || ctx.Err() != nil {
				continue
			}
			if d, err := peekRule(ctx, st.engine, r.Name, t.Key); err == nil {
				t.State = "allowed"
				if !d.Allowed {
					t.State, t.RetryAfter = "denied", wire.Seconds(d.RetryAfter)
				}
			}
		}
	}
}

// peekRule returns the decision of the named rule on a take of key,
// taking nothing: for a shadow rule, what it would decide.
func peekRule(ctx context.Context, e *rules.Engine, rule, key string) (sluice.Decision, error) {
	res, err := e.Check(ctx, rules.Request{Domain: rule, Descriptors: []rules.Descriptor{rules.Key(key)}, Op: sluice.OpPeek})
	if err != nil || len(res.Statuses) == 0 {
		return sluice.Decision{Allowed: true}, err
	}
	return res.Statuses[0].Decision, res.Statuses[0].Err
}

// banOf returns the ban of bans that holds key, an address or a key.
func banOf(bans []wire.Ban, key string) *wire.Ban {
	addr, aerr := netip.ParseAddr(key)
	for i, b := range bans {
		if b.Key == key {
			return &bans[i]
		}
		if aerr != nil {
			continue
		}
		if p, err := guard.ParsePrefix(b.Key); err == nil && p.Contains(addr) {
			return &bans[i]
		}
	}
	return nil
}
