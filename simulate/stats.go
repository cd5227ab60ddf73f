package simulate

import (
	"hash/maphash"
	"math"
	"math/bits"
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
	traffic *topKeys   // requests per key, with each rule's denials in its column
	rates   rateCounts // a distribution per period of the rules' limits
}

// newRouteStats returns the shared tallies of prefix, its traffic
// sketch of sketch keys of seed, for the rules routed to it, whose
// columns they become; its rate histograms, if rates, count keys within
// the budget left (with none, rateCounts.add counts nothing).
func newRouteStats(prefix string, rules []*ruleStats, sketch int, seed maphash.Seed, rates bool, left *int) *routeStats {
	p := &routeStats{prefix: prefix, rules: rules, keys: newDistinct(seed), traffic: newTopKeys(sketch, len(rules), seed)}
	for i, rs := range rules {
		rs.path, rs.col = p, i
		if !rates {
			continue
		}
		for _, l := range rs.rule.Limits {
			rs.rates = append(rs.rates, p.rates.hist(int64(l.Period)))
		}
	}
	p.rates.counts, p.rates.left = newCountTable(len(p.rates.hists)), left
	return p
}

// count counts a request of key at t, whose hash of the sketches' seed
// is h, and returns its counter in the traffic sketch, for the rules to
// tell.
func (p *routeStats) count(t int64, key string, h uint64) *counter {
	p.keys.addHashed(h)
	p.rates.add(t, h)
	return p.traffic.addHashed(h, key)
}

// merge adds the shared tallies of o, the same prefix's of another
// worker.
func (p *routeStats) merge(o *routeStats) {
	p.keys.merge(o.keys)
	p.traffic.merge(o.traffic)
	p.rates.merge(&o.rates)
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
	rates      []*rateHist // one per limit of the rule: its path's of the limit's period
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
func (rs *ruleStats) tally(t int64, key string, hash uint64, c *counter, res *rules.Result) {
	st := &res.Statuses[0] // not a copy: a Status is large
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

// maxTallyWords bounds the words that the rate tables of a replay's
// routes hold, together (slots of two words and one per two periods, at
// most half full: 64 MiB of slots, 128 at most with the room); the
// workers of a replay share it.
const maxTallyWords = 1 << 23

// A rateHist is the distribution of how many requests each key made in
// each window of a period (a limit's, aligned to the Unix epoch), in
// power-of-two buckets: bucket b holds the (key, window) pairs of
// 2^b to 2^(b+1)-1 requests. Its route's rateCounts counts the windows;
// the requests of keys beyond the tables' budget are counted in
// Untallied.
type rateHist struct {
	period    int64 // ns
	Buckets   [40]int64
	Untallied int64
}

// tally counts a (key, window) pair of n requests.
func (h *rateHist) tally(n int32) {
	h.Buckets[min(bits.Len32(uint32(n))-1, len(h.Buckets)-1)]++
}

// fold returns what is left of a key's count n of h's period, last
// counted at last, at t: n, or none once its window ended by t, when it
// goes to the distribution.
func (h *rateHist) fold(n int32, last, t int64) int32 {
	if n > 0 && t/h.period > last/h.period {
		h.tally(n)
		return 0
	}
	return n
}

// A rateCounts counts the requests of each key of a route in the current
// window of each period of its rules' limits, for the distributions of
// those periods (hists): one slot per key, with a column per period and
// the time of the key's latest request, so that a request costs one
// lookup (a table per period cost the sample's rules four a line). A
// key's count of a period goes to the distribution when the key comes
// back in a later window of that period; when the longest period's
// window ends, every count whose window ended goes, and the keys left
// with none are let go: the table holds the keys of one window of the
// longest period, as that period's own table did. The words the rate
// tables of a replay hold are bounded together (*left is what is left
// of maxTallyWords), and the requests of keys beyond them are counted
// as untallied. The zero value is an empty table of no period; hist adds
// them before the first add.
type rateCounts struct {
	hists   []*rateHist // by column
	longest int64       // the longest period, ns
	window  int64       // the longest period's current window
	counts  countTable
	left    *int     // words the replay's rate tables may add
	kept    []uint64 // sweep's scratch: the slots it puts back
}

// hist returns the distribution of period (ns), adding its column if new.
func (r *rateCounts) hist(period int64) *rateHist {
	for _, h := range r.hists {
		if h.period == period {
			return h
		}
	}
	h := &rateHist{period: period}
	r.hists, r.longest = append(r.hists, h), max(r.longest, period)
	return h
}

// add counts a request at t of the key of hash key.
func (r *rateCounts) add(t int64, key uint64) {
	if len(r.hists) == 0 {
		return
	}
	if w := t / r.longest; w > r.window {
		r.sweep(t)
		r.window = w
	}
	s, isNew := r.counts.slot(key, *r.left >= r.counts.stride)
	switch {
	case s == nil:
		for _, h := range r.hists {
			h.Untallied++
		}
		return
	case isNew:
		*r.left -= r.counts.stride
		s[1] = uint64(t)
	}
	last := int64(s[1])
	for i, h := range r.hists {
		setCount(s, i, h.fold(count(s, i), last, t)+1)
	}
	s[1] = uint64(max(last, t))
}

// sweep gives the distributions the counts whose window ended by t, and
// lets go of the keys left with none: the table is emptied as a window's
// table was (its room kept, unless large), and the keys still counting
// put back.
func (r *rateCounts) sweep(t int64) {
	kept := r.kept[:0]
	for s := range r.counts.each(r.counts.words) {
		last, counting := int64(s[1]), false
		for i, h := range r.hists {
			n := h.fold(count(s, i), last, t)
			setCount(s, i, n)
			counting = counting || n > 0
		}
		if counting {
			kept = append(kept, s...)
		}
	}
	stride := r.counts.stride
	*r.left += r.counts.n*stride - len(kept)
	r.counts.reset()
	for i := 0; i < len(kept); i += stride {
		k, _ := r.counts.slot(kept[i], true)
		copy(k[1:], kept[i+1:i+stride])
	}
	r.kept = kept[:0]
}

// flush gives the distributions every count, and lets go of every key:
// a sweep at the end of time, when every window has ended.
func (r *rateCounts) flush() { r.sweep(math.MaxInt64) }

// merge adds the distributions of o, the same route's over other keys
// (another worker's).
func (r *rateCounts) merge(o *rateCounts) {
	r.flush()
	o.flush()
	for i, h := range r.hists {
		oh := o.hists[i]
		for b, n := range oh.Buckets {
			h.Buckets[b] += n
		}
		h.Untallied += oh.Untallied
	}
}
