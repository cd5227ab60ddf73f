package memcached

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/internal/meta"
)

// A plan is one request's view of its limits' state in memcached: which
// keys to read and write, and what the replies said.
type plan struct {
	raw     string // Prefix+Key: what algorithm.Offset and Decide hash
	now     int64
	cost    int
	margin  time.Duration
	limits  []sluice.Limit
	parts   []part
	states  [][]int64
	anyCAS  bool
	refund  bool
	reward  bool   // an insert of -cost: refund's path gives back what still counts
	scratch []byte // a head value being written: the batch copies it
	// seen, if set, is told each GCRA or sliding log state read, with its
	// CAS token (the Store remembers them: see decideCached).
	seen func(base string, enc []byte, cas uint64)
}

// A part is one limit's share of a plan.
//
// A counter limit (fixed or sliding window) keeps one memcached counter
// per window or sub-window ("bucket"), and a head item "gen:newest": the
// generation of its bucket keys (a reset starts a new one, so that stale
// counters are never read again) and the newest bucket a take was counted
// in (the reference algorithms count a take whose clock is behind in the
// newest bucket seen, not in an older one).
//
// A CAS limit (GCRA, sliding log) keeps its algorithm state encoded by
// algorithm.AppendState in one item, rewritten with compare-and-set.
type part struct {
	l       sluice.Limit
	counter bool
	base    string
	off     int64 // algorithm.Offset: staggered windows start off past the epoch
	width   int64 // bucket width (the period for a fixed window)
	view    int64 // buckets read before the target: G, or 0 for a fixed window

	// counters
	target    int64  // the bucket a take counts in
	gen       uint64 // generation of the bucket keys used
	headFound bool
	headCAS   uint64
	headGen   uint64
	newest    int64
	incrKey   string // the counter incremented, to roll back; "" if none
	rHead     int
	rIncr     int
	rPast     int

	// CAS state
	found bool
	cas   uint64
	rSt   int
}

func newPlan(r *sluice.Request, raw string, name string, now int64, margin time.Duration) *plan {
	p := &plan{raw: raw, now: now, cost: r.Cost, margin: margin, limits: r.Limits}
	p.parts = make([]part, len(r.Limits))
	p.states = make([][]int64, len(r.Limits))
	for i, l := range r.Limits {
		pt := &p.parts[i]
		pt.l = l
		pt.base = limitBase(name, l.StateID())
		switch l.Algorithm {
		case sluice.FixedWindow:
			pt.counter, pt.width = true, int64(l.Period)
			pt.off = algorithm.Offset(l, raw)
		case sluice.SlidingWindow, sluice.ApproxSlidingWindow:
			g := int64(l.BucketCount())
			pt.counter, pt.view = true, g
			pt.width = (int64(l.Period) + g - 1) / g
		default:
			p.anyCAS = true
		}
		if pt.counter {
			pt.target = floorDiv(now-pt.off, pt.width)
		}
	}
	return p
}

// appendRead appends the commands that read every limit's state; for a
// take it also creates a missing head and counts the take in each
// counter limit's target bucket, so that a request is one round trip.
func (p *plan) appendRead(b *meta.Batch, take bool) {
	for i := range p.parts {
		pt := &p.parts[i]
		pt.incrKey = ""
		if !pt.counter {
			pt.rSt = b.Len()
			b.GetCAS(stateKey(pt.base))
			continue
		}
		hk := headKey(pt.base)
		if take {
			p.scratch = appendHead(p.scratch[:0], pt.gen, pt.target)
			b.Add(hk, p.scratch, pt.bucketTTL(p, pt.target))
		}
		pt.rHead = b.Len()
		b.GetCAS(hk)
		first, last := pt.target-pt.view, pt.target
		if take {
			pt.incrKey = bucketKey(pt.base, pt.gen, pt.target)
			pt.rIncr = b.Len()
			b.IncrCreate(pt.incrKey, uint64(p.cost), pt.bucketTTL(p, pt.target))
			// memcached's ma does not mark an item as used: without this
			// read, a counter in constant use drifts to the cold end of the
			// LRU and is evicted first under memory pressure.
			b.Bump(pt.incrKey)
			last--
		}
		pt.rPast = b.Len()
		for i := first; i <= last; i++ {
			b.Get(bucketKey(pt.base, pt.gen, i))
		}
	}
}

// readReplies fills p.states from the replies to appendRead. It reports
// redo when a counter limit read the wrong generation or a bucket older
// than the newest: the plan is then aimed right and must run again, after
// rolling back its increments.
func (p *plan) readReplies(b *meta.Batch, take bool) (redo bool, err error) {
	rep := b.Replies
	for i := range p.parts {
		pt := &p.parts[i]
		l := pt.l
		if !pt.counter {
			pt.found, pt.cas = false, 0
			st, err := p.readState(pt, &rep[pt.rSt])
			if err != nil {
				return false, err
			}
			p.states[i] = st
			continue
		}
		if take {
			if add := &rep[pt.rHead-1]; add.Status != meta.StatusOK && add.Status != meta.StatusNotStored {
				return false, unexpected(add)
			}
		}
		if err := pt.readHead(&rep[pt.rHead]); err != nil {
			return false, err
		}
		var cur uint64
		if take {
			v, err := counterValue(&rep[pt.rIncr])
			if err != nil {
				return false, err
			}
			if bump := &rep[pt.rIncr+1]; bump.Status != meta.StatusOK && bump.Status != meta.StatusMiss {
				return false, unexpected(bump)
			}
			if v < uint64(p.cost) {
				return false, fmt.Errorf("%w: counter %d below the increment %d", sluice.ErrCorruptState, v, p.cost)
			}
			cur = v - uint64(p.cost)
		}
		if pt.headGen != pt.gen {
			pt.gen, redo = pt.headGen, true
		}
		if pt.newest > pt.target || (p.refund && pt.headFound && pt.newest != pt.target) {
			// A refund works on the newest bucket's view, as the
			// reference's state does.
			pt.target, redo = pt.newest, true
		}
		if redo {
			continue
		}
		st := make([]int64, algorithm.Words(l))
		st[0] = pt.target
		for j := int64(0); j <= pt.view; j++ {
			idx := pt.target - pt.view + j
			var v uint64
			switch {
			case take && idx == pt.target:
				v = cur
			default:
				v, err = counterValue(&rep[pt.rPast+int(j)])
				if err != nil {
					return false, err
				}
			}
			if v > 1<<62 {
				return false, fmt.Errorf("%w: counter %d out of range", sluice.ErrCorruptState, v)
			}
			if pt.view == 0 {
				st[1] = int64(v)
			} else {
				st[slot(pt.view, idx)] = int64(v)
			}
		}
		p.states[i] = st
	}
	return redo, nil
}

// readState decodes a CAS limit's state; a missing item is the empty state.
func (p *plan) readState(pt *part, r *meta.Reply) ([]int64, error) {
	switch r.Status {
	case meta.StatusMiss:
		return make([]int64, algorithm.Words(pt.l)), nil
	case meta.StatusValue:
		st, err := algorithm.DecodeState(pt.l, r.Value)
		if err != nil {
			return nil, err
		}
		pt.found, pt.cas = true, r.CAS
		if p.seen != nil {
			p.seen(pt.base, r.Value, r.CAS)
		}
		return st, nil
	}
	return nil, unexpected(r)
}

func (pt *part) readHead(r *meta.Reply) error {
	pt.headFound, pt.headCAS, pt.headGen, pt.newest = false, 0, 0, 0
	switch r.Status {
	case meta.StatusMiss:
		return nil
	case meta.StatusValue:
		gen, newest, ok := parseHead(r.Value)
		// Bucket numbers of times up to 2200 keep their ends in int64.
		if !ok || newest < -1 || newest > math.MaxInt64/4/pt.width {
			return fmt.Errorf("%w: head %q", sluice.ErrCorruptState, r.Value)
		}
		pt.headFound, pt.headCAS, pt.headGen, pt.newest = true, r.CAS, gen, newest
		return nil
	}
	return unexpected(r)
}

// bucketTTL is how long bucket idx of a counter limit matters, seen at
// the plan's time, plus the margin: until it leaves the window.
func (pt *part) bucketTTL(p *plan, idx int64) time.Duration {
	end := (idx + pt.view + 1) * pt.width
	return time.Duration(max(end-(p.now-pt.off), 0)) + p.margin
}

// stateTTL is how long a CAS limit's state can matter: GCRA's bucket
// depth or the sliding log's period, plus the margin.
func (pt *part) stateTTL(p *plan) time.Duration {
	depth := time.Duration(pt.l.MaxBurst()) * pt.l.Interval()
	return max(2*depth, pt.l.Period) + p.margin // a penalty may leave GCRA 2τ deep
}

// giveBack gives back p.cost of the state st of part pt: taken at at for
// a refund, the oldest still counted for a reward.
func (p *plan) giveBack(pt *part, st []int64, at int64) {
	if p.reward {
		algorithm.Insert(pt.l, st, p.now-pt.off, -p.cost)
	} else {
		algorithm.Refund(pt.l, st, at-pt.off, p.now-pt.off, p.cost)
	}
}

// headTTLAfterReset outlives every bucket written before the reset.
func (pt *part) headTTLAfterReset(p *plan) time.Duration {
	return time.Duration(pt.view+1)*time.Duration(pt.width) + p.margin
}

func headValue(gen uint64, newest int64) []byte { return appendHead(nil, gen, newest) }

// appendHead appends a head's value, "gen:newest", to b.
func appendHead(b []byte, gen uint64, newest int64) []byte {
	b = strconv.AppendUint(b, gen, 10)
	b = append(b, ':')
	return strconv.AppendInt(b, newest, 10)
}

func parseHead(v []byte) (gen uint64, newest int64, ok bool) {
	g, n, found := bytes.Cut(v, []byte(":"))
	if !found {
		return 0, 0, false
	}
	gen, err := strconv.ParseUint(string(g), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	newest, err = strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return gen, newest, true
}

// counterValue reads a counter from a get or increment reply: a missing
// counter is zero.
func counterValue(r *meta.Reply) (uint64, error) {
	switch r.Status {
	case meta.StatusMiss:
		return 0, nil
	case meta.StatusValue:
		v, err := meta.ParseCounter(r.Value)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", sluice.ErrCorruptState, err)
		}
		return v, nil
	case meta.StatusClientError:
		// "cannot increment or decrement non-numeric value": the key holds
		// something that is not a counter.
		return 0, fmt.Errorf("%w: %w", sluice.ErrCorruptState, r.Err())
	}
	return 0, unexpected(r)
}

func unexpected(r *meta.Reply) error {
	if err := r.Err(); err != nil {
		return fmt.Errorf("%w: %w", sluice.ErrStore, err)
	}
	return fmt.Errorf("%w: unexpected reply %v", sluice.ErrStore, r.Status)
}

// slot is where the sliding window counter keeps bucket i in its ring of
// g+1 counters: state word 1 + i mod (g+1) (see package algorithm).
func slot(g, i int64) int {
	m := i % (g + 1)
	if m < 0 {
		m += g + 1
	}
	return 1 + int(m)
}

// floorDiv returns ⌊a/b⌋ for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
