package simulate

import (
	"hash/maphash"
	"math/bits"
	"slices"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/server/rules"
)

// routeStats tallies what the rules of one path prefix share: a
// request is asked of every rule of its route (see Replayer.decide), so
// they see the same keys, counted once for them all.
type routeStats struct {
	prefix  string
	rules   []*ruleStats
	keys    *distinct
	traffic *topKeys    // requests per key, with each rule's denials in its column
	rates   []*rateHist // one per period of the rules' limits
}

// newRouteStats returns the shared tallies of prefix, its traffic
// sketch of sketch keys of seed, for the rules routed to it, whose
// columns they become; its rate histograms count keys within the budget
// left.
func newRouteStats(prefix string, rules []*ruleStats, sketch int, seed maphash.Seed, left *int) *routeStats {
	p := &routeStats{prefix: prefix, rules: rules, keys: newDistinct(seed), traffic: newTopKeys(sketch, len(rules), seed)}
	for i, rs := range rules {
		rs.path, rs.col = p, i
		for _, l := range rs.rule.Limits {
			k := slices.IndexFunc(p.rates, func(h *rateHist) bool { return h.period == int64(l.Period) })
			if k < 0 {
				k, p.rates = len(p.rates), append(p.rates, &rateHist{period: int64(l.Period), left: left})
			}
			rs.rates = append(rs.rates, p.rates[k])
		}
	}
	return p
}

// count counts a request of key at t, whose hash of the sketches' seed
// is h, and returns its counter in the traffic sketch, for the rules to
// tell.
func (p *routeStats) count(t int64, key string, h uint64) *counter {
	p.keys.addHashed(h)
	for _, r := range p.rates {
		r.add(t, h)
	}
	return p.traffic.addHashed(h, key)
}

// merge adds the shared tallies of o, the same prefix's of another
// worker.
func (p *routeStats) merge(o *routeStats) {
	p.keys.merge(o.keys)
	p.traffic.merge(o.traffic)
	for i, h := range p.rates {
		h.merge(o.rates[i])
	}
}

// ruleStats tallies what one rule decided.
type ruleStats struct {
	route Route
	rule  *rules.Rule
	top   int
	path  *routeStats // its keys and traffic, shared with the other rules of its prefix
	col   int         // its column of path's traffic sketch

	// The decision of the entry being replayed: whether the rule was
	// asked (its route taken, its check done), its key and verdict.
	asked     bool
	key       string
	wasDenied bool

	Requests, WouldDeny, Shadowed, Banned, Refused, Exempt, Bans int64
	FirstDenial, LastDenial                                      int64 // Unix ns; 0: none

	deniedKeys *distinct
	denials    *topKeys // denials per key
	series     series
	rates      []*rateHist // one per limit of the rule, its path's of the limit's period
}

// Defaults of the report's sizes: the keys listed per rule, and the keys
// the heavy-hitter sketches of a replay's rules hold together (4096 a
// rule up to 16 rules, then shares of the budget, at least 256 each), so
// that a rule set of hundreds of rules replays in bounded memory.
const (
	defaultTop    = 20
	defaultSketch = 4096
	sketchBudget  = 16 * defaultSketch
	minSketch     = 256
)

// sizes returns the keys listed per rule and the keys a sketch of each of
// n rules holds: those of c, or their defaults where c leaves 0.
func (c Config) sizes(n int) (top, sketch int) {
	top, sketch = c.TopKeys, c.Sketch
	if top <= 0 {
		top = defaultTop
	}
	if sketch <= 0 {
		sketch = min(defaultSketch, max(minSketch, top, sketchBudget/max(n, 1)))
	}
	return top, sketch
}

// newRuleStats returns the tallies of the rule ru of route rt, listing
// top keys from a sketch of denials of sketch/4 keys (of seed).
// newRouteStats gives it its path and rate histograms.
func newRuleStats(rt Route, ru *rules.Rule, top, sketch int, seed maphash.Seed) *ruleStats {
	return &ruleStats{
		route: rt, rule: ru, top: top,
		deniedKeys: newDistinct(seed), denials: newTopKeys(max(sketch/4, top), 0, seed),
	}
}

// tally counts the result res of a request of key, whose hash of the
// sketches' seed is hash, at t, and whose counter in the path's traffic
// is c.
func (rs *ruleStats) tally(t int64, key string, hash uint64, c *counter, res rules.Result) {
	st := res.Statuses[0]
	denied := !res.Allowed || st.Shadowed
	rs.asked, rs.key, rs.wasDenied = true, key, denied
	rs.Requests++
	c.tell(rs.col, denied)
	rs.series.add(t, denied)
	switch st.Guard {
	case guard.Banned:
		rs.Banned++
	case guard.Refuse:
		rs.Refused++
	case guard.Exempt:
		rs.Exempt++
	}
	if st.Shadowed {
		rs.Shadowed++
	}
	if !denied {
		return
	}
	rs.WouldDeny++
	rs.deniedKeys.addHashed(hash)
	rs.denials.addHashed(hash, key)
	if rs.FirstDenial == 0 {
		rs.FirstDenial = t
	}
	rs.LastDenial = max(rs.LastDenial, t)
}

// merge adds the tallies of o, a rule's stats over other keys (those of
// another worker of the replay): counts add, first and last denials
// extend, the sketches merge (those of its path apart: routeStats.merge).
func (rs *ruleStats) merge(o *ruleStats) {
	rs.Requests += o.Requests
	rs.WouldDeny += o.WouldDeny
	rs.Shadowed += o.Shadowed
	rs.Banned += o.Banned
	rs.Refused += o.Refused
	rs.Exempt += o.Exempt
	rs.Bans += o.Bans
	if o.FirstDenial != 0 && (rs.FirstDenial == 0 || o.FirstDenial < rs.FirstDenial) {
		rs.FirstDenial = o.FirstDenial
	}
	rs.LastDenial = max(rs.LastDenial, o.LastDenial)
	rs.deniedKeys.merge(o.deniedKeys)
	rs.denials.merge(o.denials)
	rs.series.merge(&o.series)
}

// seriesLen is the number of buckets of a time series.
const seriesLen = 240

// widths are the bucket widths of a series, each a multiple of the one
// before, so that widening merges whole buckets.
var widths = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute,
	10 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// A series counts requests and denials over time in seriesLen buckets,
// whose width grows (1 s, 5 s, 10 s, … 1 day, then doubling) whenever the
// log outgrows them, so that its memory stays fixed whatever the span.
// Buckets are aligned to their width. The zero value is an empty series.
type series struct {
	start, width int64 // Unix ns of bucket 0, bucket width in ns; 0: empty
	req, deny    [seriesLen]int64
	early        int64 // requests before start (logged out of order)
}

func (s *series) add(t int64, denied bool) {
	var deny int64
	if denied {
		deny = 1
	}
	s.addN(t, 1, deny)
}

// addN counts req requests, deny of them denied, at t.
func (s *series) addN(t, req, deny int64) {
	if s.width == 0 {
		s.width = int64(time.Second)
		s.start = t - t%s.width
	}
	if t < s.start {
		s.early += req
		t = s.start
	}
	for (t-s.start)/s.width >= seriesLen {
		s.widen()
	}
	i := (t - s.start) / s.width
	s.req[i] += req
	s.deny[i] += deny
}

// merge adds the buckets of o: both are rebuilt from the earlier start,
// at the wider width (widths are multiples of each other, so that each
// bucket falls in one bucket of the merged series).
func (s *series) merge(o *series) {
	switch {
	case o.width == 0:
		return
	case s.width == 0:
		*s = *o
		return
	}
	old := *s
	w, start := max(s.width, o.width), min(s.start, o.start)
	*s = series{start: start - start%w, width: w, early: old.early + o.early}
	for _, p := range [...]*series{&old, o} {
		for i := range seriesLen {
			if p.req[i] > 0 {
				s.addN(p.start+int64(i)*p.width, p.req[i], p.deny[i])
			}
		}
	}
}

// widen moves the buckets to the next width, realigned.
func (s *series) widen() {
	w := 2 * s.width
	for _, n := range widths {
		if int64(n) > s.width {
			w = int64(n)
			break
		}
	}
	start := s.start - s.start%w
	var req, deny [seriesLen]int64
	for i := range seriesLen {
		j := (s.start + int64(i)*s.width - start) / w
		req[j] += s.req[i]
		deny[j] += s.deny[i]
	}
	s.start, s.width, s.req, s.deny = start, w, req, deny
}

// maxTallyKeys bounds the keys that the rate histograms of a replay's
// rules count in their current windows, together (16-byte slots, at
// most half full); the workers of a replay share it.
const maxTallyKeys = 1 << 22

// A rateHist is the distribution of how many requests each key made in
// each window of a period (a limit's, aligned to the Unix epoch), in
// power-of-two buckets: bucket b holds the (key, window) pairs of
// 2^b to 2^(b+1)-1 requests. It keeps the counts of the current window
// only, so its memory is that of the keys active in one window; the keys
// counted by every rateHist of a replay are bounded together (*left is
// what is left of maxTallyKeys), and the requests of keys beyond them are
// counted in Untallied.
type rateHist struct {
	period    int64 // ns
	Buckets   [40]int64
	Untallied int64
	window    int64
	counts    countTable // by the key's hash
	left      *int       // keys the replay's rateHists may add
}

// add counts a request at t of the key of hash key.
func (h *rateHist) add(t int64, key uint64) {
	if w := t / h.period; w > h.window {
		h.flush()
		h.window = w
	}
	n := h.counts.n
	if !h.counts.add(key, *h.left <= 0) {
		h.Untallied++
	}
	*h.left -= h.counts.n - n
}

// merge adds the distribution of o, over other keys (another worker's).
func (h *rateHist) merge(o *rateHist) {
	h.flush()
	o.flush()
	for i, n := range o.Buckets {
		h.Buckets[i] += n
	}
	h.Untallied += o.Untallied
}

// flush moves the current window's counts into the buckets, and gives
// its keys back to the budget.
func (h *rateHist) flush() {
	h.counts.each(func(n int32) {
		h.Buckets[min(bits.Len32(uint32(n))-1, len(h.Buckets)-1)]++
	})
	*h.left += h.counts.n
	h.counts.reset()
}
