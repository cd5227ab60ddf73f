package server

import (
	"context"
	"log/slog"
	"math"
	"net/netip"
	"slices"
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
// second of each rule by cause (read from its Prometheus counters, never
// counted twice) over the last liveSeconds, and the keys each rule
// refused most over the last minute (counted by the rule's meter and
// the guard, in a topkeys.Window). It samples them every liveTick, from
// start to close, and only while a dashboard streams builds a Snapshot,
// once for all of them, with the state of the top keys.
type live struct {
	feed    *admin.Feed
	m       *metrics
	state   func() *state            // the configuration in force
	bans    *guard.BanSet            // the bans the service enforces
	quota   func() []wire.QuotaStats // the edge quotas' buckets; nil: none
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

// Causes of a liveRule's series, in the order of its counters.
const (
	causeAllowed = iota
	causeDenied
	causeEstimated
	causeBanned
	causeDenyList
	causes
)

// liveRule is the series of one scope (a named rule or a domain).
type liveRule struct {
	name   string
	mode   string
	policy sluice.FailurePolicy
	taken  [len(resultLabels)]prometheus.Counter
	guard  [guard.Banned + 1]prometheus.Counter // by guard.Action; none for Pass
	prev   [causes]float64                      // the counts at the latest sample
	errs   float64                              // errors in the latest sample
	errsAt float64                              // the errors' count at the latest sample
	series [causes][]float64
	top    *topkeys.Window
}

// newLive returns the dashboard's series of the scopes of the metrics m,
// none yet, to sample from start.
func newLive(m *metrics, state func() *state, bans *guard.BanSet, clock func() time.Time, log *slog.Logger) *live {
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
	r := &liveRule{name: scope, top: l.windows[scope], taken: rm.counts[sluice.OpTake], guard: rm.guard}
	for i := range r.series {
		r.series[i] = make([]float64, len(l.times))
	}
	if r.top == nil {
		r.top = topkeys.NewWindow(topkeys.WindowConfig{})
	}
	r.prev, r.errsAt = r.counts()
	return r
}

// counts returns the rule's counts by cause, and its errors, now.
func (r *liveRule) counts() (c [causes]float64, errs float64) {
	c[causeAllowed] = counterValue(r.taken[0]) + counterValue(r.guard[guard.Exempt])
	c[causeDenied] = counterValue(r.taken[1])
	c[causeEstimated] = counterValue(r.taken[3])
	c[causeBanned] = counterValue(r.guard[guard.Banned])
	c[causeDenyList] = counterValue(r.guard[guard.Refuse])
	return c, counterValue(r.taken[2])
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
		cur, errs := r.counts()
		for i := range r.series {
			r.series[i] = push(r.series[i], rate(cur[i]-r.prev[i], secs))
		}
		r.prev, r.errs, r.errsAt = cur, errs-r.errsAt, errs
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

// snapshot copies the series and top keys at now into a Snapshot, the
// latest sample of each series or, with history, all of them; the keys'
// states are for keyStates to fill.
func (l *live) snapshot(now time.Time, history bool) *admin.Snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	from := max(len(l.times)-1, 0)
	if history {
		from = 0
	}
	tail := func(s []float64) []float64 { return slices.Clone(s[from:]) }
	s := &admin.Snapshot{Time: now, Times: slices.Clone(l.times[from:]), Rules: make([]admin.RuleLive, len(l.rules))}
	for i, r := range l.rules {
		s.Rules[i] = admin.RuleLive{Name: r.name, Mode: r.mode, Health: l.health(r),
			Allowed: tail(r.series[causeAllowed]), Denied: tail(r.series[causeDenied]), Estimated: tail(r.series[causeEstimated]),
			Banned: tail(r.series[causeBanned]), DenyList: tail(r.series[causeDenyList]),
			Totals: admin.Causes{Allowed: uint64(r.prev[causeAllowed]), Denied: uint64(r.prev[causeDenied]),
				Estimated: uint64(r.prev[causeEstimated]), Banned: uint64(r.prev[causeBanned]), DenyList: uint64(r.prev[causeDenyList])},
			TopWindow: int(r.top.Span() / time.Second)}
		top, _ := r.top.Top(now, liveTop)
		for _, c := range top {
			s.Rules[i].Top = append(s.Rules[i].Top, admin.TopKey{Key: c.Key, Refusals: c.Count, Error: c.Err, State: "unknown"})
		}
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
	if err := l.feed.Publish(l.fill(ctx, l.snapshot(now, false))); err != nil {
		l.log.Warn("dashboard snapshot", "err", err)
	}
}

// current returns the snapshot of the latest sample, with the rates of
// the last minutes: what a dashboard draws when it opens.
func (l *live) current(ctx context.Context) *admin.Snapshot {
	l.mu.Lock()
	at := l.last
	l.mu.Unlock()
	return l.fill(ctx, l.snapshot(at, true))
}

// fill completes snap with the state of its top keys, the bans' counts
// and the jails' lost strikes, asking the store for at most liveCalls.
func (l *live) fill(ctx context.Context, snap *admin.Snapshot) *admin.Snapshot {
	ctx, cancel := context.WithTimeout(ctx, liveCalls)
	defer cancel()
	st := l.bans.Stats()
	snap.BansTotal, snap.BansChanges = st.Bans, st.Changes
	snap.Jails = l.m.strikesLostByJail()
	if l.quota != nil {
		snap.Quota = l.quota()
	}
	l.keyStates(ctx, snap)
	return snap
}

// keyStates fills in the state of each top key: what the guard of the
// configuration in force does with it, else, for a named rule, what a
// peek of the rule says (a domain's keys stay unknown, as do keys the
// store knows by their digest).
func (l *live) keyStates(ctx context.Context, snap *admin.Snapshot) {
	st := l.state()
	for i := range snap.Rules {
		r := &snap.Rules[i]
		_, named := st.cfg.Rule(r.Name)
		for j := range r.Top {
			t := &r.Top[j]
			if t.Hashed = hashedKey(t.Key); t.Hashed || !named {
				continue
			}
			if l.guardState(st, t) || ctx.Err() != nil {
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

// guardState sets the state of t when the guard of st decides its key
// (the peek of a rule would ask it too, and count it as a refusal), and
// reports whether it did.
func (l *live) guardState(st *state, t *admin.TopKey) bool {
	v := st.guard.Check(guard.NewActor(netip.Addr{}, t.Key))
	switch v.Action {
	case guard.Exempt:
		t.State = "allow-list"
	case guard.Refuse:
		t.State = "deny-list"
	case guard.Banned:
		b := adminBan(v.Ban)
		b.Refused = l.bans.RefusalsOf(b.Jail, b.Key)
		t.State, t.Ban = "banned", &b
	default:
		return false
	}
	return true
}

// hashedKey reports whether key is a state key of a longer key: "#"
// and the digest (see rules' stateKey).
func hashedKey(key string) bool {
	return len(key) == 44 && key[0] == '#'
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
