package memcached

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/internal/meta"
)

// ErrContention means a request found its state changed under it more
// than Config.MaxRetries times in a row (other processes writing the same
// GCRA or sliding log state, or clocks that keep disagreeing on the
// newest window). It wraps sluice.ErrStore, so the caller's failure
// policy decides.
var ErrContention = fmt.Errorf("%w: memcached: state kept changing, retries exhausted", sluice.ErrStore)

// Config configures a Store. The zero value of each field but Addrs
// means its default.
type Config struct {
	// Addrs are the memcached servers, "host:port" each. At least one.
	// Actors are spread over them by ketama consistent hashing of their
	// names, keyed by these strings: list every server the same way in
	// every process (and in other ketama clients) to agree on placement.
	Addrs []string
	// Weights, when set, gives the ketama weight of each server of Addrs,
	// in order. Default: all equal.
	Weights []int
	// Timeout bounds each round trip to a server when the context has no
	// earlier deadline. Default 500ms.
	Timeout time.Duration
	// DialTimeout bounds connecting to a server. Default 1s.
	DialTimeout time.Duration
	// MaxIdleConns is the most idle connections kept per server.
	// Default 64.
	MaxIdleConns int
	// MaxRetries bounds how often a request starts again after losing a
	// compare-and-set race or reading a stale head; then it fails with
	// ErrContention. Default 32.
	MaxRetries int
	// ExpiryMargin is added to the time each item can still matter when
	// setting its expiry, to cover memcached's one-second clock and clock
	// skew between hosts. Default 5s.
	ExpiryMargin time.Duration
	// WrapServer, when set, wraps the store of each server (which decides
	// for the actors placed on it) in another, typically a failure policy
	// of package store/fallback: then a dead server's actors fail over by
	// that policy, with a circuit breaker of their own, while the other
	// servers' actors are decided as usual. Wrappers that are io.Closers
	// are closed by Close; a nil wrapper makes New fail. Default nil: a
	// server's errors reach the caller.
	WrapServer func(addr string, server sluice.Store) sluice.Store
}

// A Store keeps limiter state in memcached, on one server or spread over
// a fleet by ketama consistent hashing, every key of one actor on the
// server its name hashes to. See the package documentation for how each
// algorithm is kept and what is atomic.
//
// Create Stores with New; the zero value is not usable. A Store is safe
// for concurrent use; Close it to close its connections.
type Store struct {
	clients []*meta.Client
	servers []sluice.Store // what Decide asks: server, or Config.WrapServer's
	ring    *ring
	margin  time.Duration
	retries int
	batches sync.Pool
	locks   [256]sync.Mutex
	gens    [1024]atomic.Pointer[genEntry]
	denials [4096]atomic.Pointer[denial]
	states  [4096]atomic.Pointer[casEntry]
}

var _ sluice.Store = (*Store)(nil)

// New returns a Store over c.Addrs. It does not connect until first used.
func New(c Config) (*Store, error) {
	if len(c.Addrs) == 0 {
		return nil, fmt.Errorf("%w: memcached: no servers", sluice.ErrInvalidRequest)
	}
	if len(c.Weights) > len(c.Addrs) {
		return nil, fmt.Errorf("%w: memcached: %d weights for %d servers", sluice.ErrInvalidRequest, len(c.Weights), len(c.Addrs))
	}
	seen := map[string]bool{}
	for _, a := range c.Addrs {
		if seen[a] {
			return nil, fmt.Errorf("%w: memcached: server %q listed twice", sluice.ErrInvalidRequest, a)
		}
		seen[a] = true
	}
	if c.Timeout <= 0 {
		c.Timeout = 500 * time.Millisecond
	}
	if c.MaxRetries <= 0 {
		c.MaxRetries = 32
	}
	if c.ExpiryMargin <= 0 {
		c.ExpiryMargin = 5 * time.Second
	}
	s := &Store{ring: newRing(c.Addrs, c.Weights), margin: c.ExpiryMargin, retries: c.MaxRetries}
	for _, a := range c.Addrs {
		cl := meta.New(meta.Config{Addr: a, Timeout: c.Timeout, DialTimeout: c.DialTimeout, MaxIdle: c.MaxIdleConns})
		s.clients = append(s.clients, cl)
		var srv sluice.Store = &server{s, cl}
		if c.WrapServer != nil {
			if srv = c.WrapServer(a, srv); srv == nil {
				return nil, fmt.Errorf("%w: memcached: WrapServer returned nil for %s", sluice.ErrInvalidRequest, a)
			}
		}
		s.servers = append(s.servers, srv)
	}
	s.batches.New = func() any { return new(meta.Batch) }
	return s, nil
}

// Close closes the Store's idle connections, and the server wrappers
// that are io.Closers. Requests after Close fail.
func (s *Store) Close() error {
	var errs []error
	for i, c := range s.clients {
		if cl, ok := s.servers[i].(io.Closer); ok {
			errs = append(errs, cl.Close())
		}
		c.Close()
	}
	return errors.Join(errs...)
}

// Stats counts what a Store has sent since it was created, over all its
// servers.
type Stats struct {
	// RoundTrips is the number of batches sent that waited for replies.
	RoundTrips int64
	// Sends is the number of batches queued without waiting, to go out
	// with the next round trip on their connection: head updates.
	Sends int64
	// DroppedReplies counts error replies (or lost connections) to those
	// batches: head updates whose effect is unknown.
	DroppedReplies int64
}

// Stats returns the Store's counts so far.
func (s *Store) Stats() Stats {
	var st Stats
	for _, c := range s.clients {
		st.RoundTrips += c.RoundTrips()
		st.Sends += c.Sends()
		st.DroppedReplies += c.Dropped()
	}
	return st
}

// Server returns the address of the server that holds actor name
// (Request.Prefix+Request.Key).
func (s *Store) Server(name string) string {
	return s.clients[s.ring.server(keyName(name))].Addr()
}

// Decide implements sluice.Store: it asks the server that holds the actor
// (which validates the request).
func (s *Store) Decide(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
	if len(s.servers) == 1 {
		return s.servers[0].Decide(ctx, r)
	}
	return s.servers[s.ring.server(keyName(r.Prefix+r.Key))].Decide(ctx, r)
}

// Route returns a store that decides as s does, over s's connections and
// with its coordination of each actor's requests, but asks each server
// through wrap(addr, server): a failure policy of package store/fallback,
// say. A service that applies different policies to different rules
// routes each policy's requests through a Router of its own, over one
// set of connections. A nil wrapper is an error wrapping
// sluice.ErrInvalidRequest. Closing the Router closes the wrappers that
// are io.Closers; s stays open.
func (s *Store) Route(wrap func(addr string, server sluice.Store) sluice.Store) (*Router, error) {
	rt := &Router{ring: s.ring}
	for _, c := range s.clients {
		srv := wrap(c.Addr(), &server{s, c})
		if srv == nil {
			return nil, fmt.Errorf("%w: memcached: Route's wrapper returned nil for %s", sluice.ErrInvalidRequest, c.Addr())
		}
		rt.servers = append(rt.servers, srv)
	}
	return rt, nil
}

// A Router is a Store's view through other server wrappers: see Route.
// It is safe for concurrent use.
type Router struct {
	ring    *ring
	servers []sluice.Store
}

var _ sluice.Store = (*Router)(nil)

// Decide asks the wrapped store of the server that holds the actor.
func (rt *Router) Decide(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
	if len(rt.servers) == 1 {
		return rt.servers[0].Decide(ctx, r)
	}
	return rt.servers[rt.ring.server(keyName(r.Prefix+r.Key))].Decide(ctx, r)
}

// Close closes the wrappers that are io.Closers.
func (rt *Router) Close() error {
	var errs []error
	for _, srv := range rt.servers {
		if cl, ok := srv.(io.Closer); ok {
			errs = append(errs, cl.Close())
		}
	}
	return errors.Join(errs...)
}

// A server is the part of a Store that decides on one memcached server,
// for the actors the ring places there.
type server struct {
	s *Store
	c *meta.Client
}

func (sv *server) Decide(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
	if err := r.Validate(); err != nil {
		return sluice.Decision{}, err
	}
	return sv.s.decideOn(ctx, sv.c, &r)
}

// decideOn applies r on the server of c.
func (s *Store) decideOn(ctx context.Context, c *meta.Client, r *sluice.Request) (sluice.Decision, error) {
	now := r.Now
	if now.IsZero() {
		now = time.Now()
	}
	raw := r.Prefix + r.Key
	name := keyName(raw)
	p := newPlan(r, raw, name, now.UnixNano(), s.margin)
	p.seen = s.cacheState
	for i := range p.parts {
		if p.parts[i].counter {
			p.parts[i].gen = s.gen(p.parts[i].base)
		}
	}
	b := s.batches.Get().(*meta.Batch)
	defer s.batches.Put(b)
	var d sluice.Decision
	var err error
	switch {
	case r.Op == sluice.OpReset:
		d, err = s.reset(ctx, c, p, b)
	case r.Op == sluice.OpRefund:
		d, err = s.refund(ctx, c, p, b, r.At.UnixNano())
	case r.Op == sluice.OpInsert && r.Cost < 0:
		p.cost, p.reward = -r.Cost, true
		d, err = s.refund(ctx, c, p, b, 0)
	case r.Op == sluice.OpInsert:
		d, err = s.penalize(ctx, c, p, b)
	default:
		d, err = s.decide(ctx, c, p, b, r.Op == sluice.OpTake)
	}
	if err != nil {
		return sluice.Decision{}, wrap(err)
	}
	d.Time = now
	return d, nil
}

// decide takes or peeks: one round trip, unless a counter limit's head
// says the plan aimed at the wrong bucket, or GCRA and sliding log states
// must be written back (a second round trip, and a retry if another
// process wrote first).
func (s *Store) decide(ctx context.Context, c *meta.Client, p *plan, b *meta.Batch, take bool) (sluice.Decision, error) {
	if take && s.recentlyDenied(p) {
		// Likely denied again: a peek decides a denial in one round trip
		// with nothing to take back; only if it allows is the take sent.
		d, err := s.decide(ctx, c, p, b, false)
		if err != nil || !d.Allowed {
			if err == nil {
				s.rememberDenial(p, d)
			}
			return d, err
		}
	}
	if take && p.anyCAS {
		mu := s.lock(p.raw)
		mu.Lock()
		defer mu.Unlock()
		if d, ok, err := s.decideCached(ctx, c, p, b); err != nil || ok {
			return d, err
		}
	}
	for attempt := 0; attempt <= s.retries; attempt++ {
		b.Reset()
		p.appendRead(b, take)
		if err := c.Do(ctx, b); err != nil {
			return sluice.Decision{}, err
		}
		redo, err := p.readReplies(b, take)
		if err != nil || redo {
			s.rollback(ctx, c, p, b)
			if err != nil {
				return sluice.Decision{}, err
			}
			s.learnGens(p)
			continue
		}
		d := algorithm.Decide(p.limits, p.states, p.raw, p.now, p.cost, sluice.OpPeek)
		if !take {
			return d, nil
		}
		if !d.Allowed {
			s.rollback(ctx, c, p, b)
			s.rememberDenial(p, d)
			return d, nil
		}
		if p.anyCAS {
			ok, err := s.commitCAS(ctx, c, p, b)
			if err != nil || !ok {
				s.rollback(ctx, c, p, b)
				if err != nil {
					return sluice.Decision{}, err
				}
				backoff(attempt)
				continue
			}
		}
		s.advanceHeads(ctx, c, p, b)
		s.forgetDenial(p)
		return d, nil
	}
	return sluice.Decision{}, ErrContention
}

// rollback takes back the plan's counter increments and waits until
// memcached has applied them, so that no request that starts after this
// one returned sees them. It runs even when ctx is done, so that a
// cancelled request leaves no count behind. If it fails, the counts stay
// up until their buckets expire (under-admission, never over-admission).
func (s *Store) rollback(_ context.Context, c *meta.Client, p *plan, b *meta.Batch) {
	b.Reset()
	for i := range p.parts {
		if k := p.parts[i].incrKey; k != "" {
			b.Decr(k, uint64(p.cost))
			p.parts[i].incrKey = ""
		}
	}
	c.Do(context.Background(), b)
}

// advanceHeads records, for each counter limit whose take opened a newer
// bucket than its head names, that bucket as the newest. It does not wait
// for the replies (see the package doc on what that means).
func (s *Store) advanceHeads(ctx context.Context, c *meta.Client, p *plan, b *meta.Batch) {
	b.Reset()
	for i := range p.parts {
		pt := &p.parts[i]
		if pt.counter && pt.headFound && pt.newest < pt.target {
			p.scratch = appendHead(p.scratch[:0], pt.gen, pt.target)
			b.CompareAndSet(headKey(pt.base), p.scratch, pt.bucketTTL(p, pt.target), pt.headCAS)
		}
	}
	c.Send(context.Background(), b) // not ctx: it must go out even when ctx is done
}

// decideCached tries a take of a policy of GCRA and sliding log limits in
// one round trip: when this process wrote or read every state last, it
// decides on the states it remembers and, if they allow, writes the new
// ones by compare-and-set on the tokens it remembers. A write that
// succeeds proves the state was the one remembered, so the decision is
// the one a read would give. It reports false when it cannot tell (a
// state not remembered, a denial, a write that lost): the caller then
// reads, as usual.
func (s *Store) decideCached(ctx context.Context, c *meta.Client, p *plan, b *meta.Batch) (sluice.Decision, bool, error) {
	for i := range p.parts {
		pt := &p.parts[i]
		if pt.counter {
			return sluice.Decision{}, false, nil
		}
		e := s.cachedState(pt.base)
		if e == nil {
			return sluice.Decision{}, false, nil
		}
		st, err := algorithm.DecodeState(pt.l, e.enc)
		if err != nil {
			return sluice.Decision{}, false, nil
		}
		p.states[i], pt.found, pt.cas = st, true, e.cas
	}
	d := algorithm.Decide(p.limits, p.states, p.raw, p.now, p.cost, sluice.OpPeek)
	if !d.Allowed {
		return sluice.Decision{}, false, nil
	}
	ok, err := s.commitCAS(ctx, c, p, b)
	if err != nil || !ok {
		return sluice.Decision{}, false, err
	}
	s.forgetDenial(p)
	return d, true, nil
}

// commitCAS writes the new GCRA and sliding log states of an allowed
// take, each only if no one wrote it since it was read. It reports false
// if some write lost that race; the writes that won are refunded.
func (s *Store) commitCAS(ctx context.Context, c *meta.Client, p *plan, b *meta.Batch) (bool, error) {
	b.Reset()
	var parts []int
	var encs [][]byte
	for i := range p.parts {
		pt := &p.parts[i]
		if pt.counter {
			continue
		}
		st := slices.Clone(p.states[i])
		algorithm.Commit(pt.l, st, p.now, p.cost)
		enc := algorithm.AppendState(nil, pt.l, st)
		if pt.found {
			b.CompareAndSet(stateKey(pt.base), enc, pt.stateTTL(p), pt.cas)
		} else {
			b.Add(stateKey(pt.base), enc, pt.stateTTL(p))
		}
		parts = append(parts, i)
		encs = append(encs, enc)
	}
	if err := c.Do(ctx, b); err != nil {
		return false, err
	}
	var won []int
	lost := false
	for j, i := range parts {
		switch r := &b.Replies[j]; r.Status {
		case meta.StatusOK:
			won = append(won, i)
			s.cacheState(p.parts[i].base, encs[j], r.CAS)
		case meta.StatusExists, meta.StatusNotFound, meta.StatusNotStored:
			s.dropState(p.parts[i].base)
			lost = true
		default:
			return false, unexpected(r)
		}
	}
	if !lost {
		return true, nil
	}
	for _, i := range won {
		if _, err := s.refundCAS(ctx, c, p, i, b, p.now, nil); err != nil {
			return false, err
		}
	}
	return false, nil
}

// refundCAS refunds cost taken at at from one GCRA or sliding log state
// (or gives back a reward's), by compare-and-set, retrying when another
// write came first, and returns the state it left. When st is given it is
// the state already read (with the part's CAS token).
func (s *Store) refundCAS(ctx context.Context, c *meta.Client, p *plan, i int, b *meta.Batch, at int64, st []int64) ([]int64, error) {
	return s.rewriteCAS(ctx, c, p, i, b, st, func(after []int64) { p.giveBack(&p.parts[i], after, at) })
}

// rewriteCAS applies change to one GCRA or sliding log state by
// compare-and-set (or add, when there was none), retrying when another
// write came first, and returns the state it left. When st is given it is
// the state already read (with the part's CAS token).
func (s *Store) rewriteCAS(ctx context.Context, c *meta.Client, p *plan, i int, b *meta.Batch, st []int64, change func([]int64)) ([]int64, error) {
	pt := &p.parts[i]
	for attempt := 0; attempt <= s.retries; attempt++ {
		if st == nil {
			b.Reset()
			b.GetCAS(stateKey(pt.base))
			if err := c.Do(ctx, b); err != nil {
				return nil, err
			}
			pt.found = false
			var err error
			if st, err = p.readState(pt, &b.Replies[0]); err != nil {
				return nil, err
			}
		}
		after := slices.Clone(st)
		change(after)
		if slices.Equal(after, st) {
			return st, nil // nothing to give back, or nothing changed
		}
		b.Reset()
		if enc := algorithm.AppendState(nil, pt.l, after); pt.found {
			b.CompareAndSet(stateKey(pt.base), enc, pt.stateTTL(p), pt.cas)
		} else {
			b.Add(stateKey(pt.base), enc, pt.stateTTL(p))
		}
		if err := c.Do(ctx, b); err != nil {
			return nil, err
		}
		switch r := &b.Replies[0]; r.Status {
		case meta.StatusOK:
			return after, nil
		case meta.StatusExists, meta.StatusNotFound, meta.StatusNotStored:
			st = nil
			backoff(attempt)
		default:
			return nil, unexpected(r)
		}
	}
	return nil, ErrContention
}

// penalize counts a penalty (an insert of p.cost > 0) under every limit,
// whether or not it fits: the counters are incremented as a take's are,
// and kept; each GCRA or sliding log state is rewritten on its own by
// compare-and-set (an insert is not all or nothing, so a lost race is
// retried alone). It answers what a peek of 1 gets after.
func (s *Store) penalize(ctx context.Context, c *meta.Client, p *plan, b *meta.Batch) (sluice.Decision, error) {
	if p.anyCAS {
		mu := s.lock(p.raw)
		mu.Lock()
		defer mu.Unlock()
	}
	for attempt := 0; ; attempt++ {
		if attempt > s.retries {
			return sluice.Decision{}, ErrContention
		}
		b.Reset()
		p.appendRead(b, true)
		if err := c.Do(ctx, b); err != nil {
			return sluice.Decision{}, err
		}
		redo, err := p.readReplies(b, true)
		if err == nil && !redo {
			break
		}
		s.rollback(ctx, c, p, b)
		if err != nil {
			return sluice.Decision{}, err
		}
		s.learnGens(p)
	}
	s.advanceHeads(ctx, c, p, b)
	for i := range p.parts {
		pt := &p.parts[i]
		if pt.counter {
			algorithm.Insert(pt.l, p.states[i], p.now-pt.off, p.cost)
			continue
		}
		st, err := s.rewriteCAS(ctx, c, p, i, b, p.states[i], func(st []int64) { algorithm.Insert(pt.l, st, p.now, p.cost) })
		if err != nil {
			return sluice.Decision{}, err
		}
		p.states[i] = st
		s.dropState(pt.base)
	}
	return algorithm.Decide(p.limits, p.states, p.raw, p.now, 1, sluice.OpPeek), nil
}

// refund gives back cost taken at at under every limit (or, for a reward,
// cost units that still count). Counter limits are decremented bucket by
// bucket as the reference's Refund would change them; GCRA and sliding
// log states by compare-and-set. It answers what a peek of cost (of 1
// for a reward) gets on the states it left (see sluice.Store).
func (s *Store) refund(ctx context.Context, c *meta.Client, p *plan, b *meta.Batch, at int64) (sluice.Decision, error) {
	s.forgetDenial(p)
	p.refund = true
	if p.anyCAS {
		mu := s.lock(p.raw)
		mu.Lock()
		defer mu.Unlock()
	}
	if err := s.readForRefund(ctx, c, p, b); err != nil {
		return sluice.Decision{}, err
	}
	if err := refundCounters(ctx, c, p, b, at); err != nil {
		return sluice.Decision{}, err
	}
	for i := range p.parts {
		if !p.parts[i].counter {
			st, err := s.refundCAS(ctx, c, p, i, b, at, p.states[i])
			if err != nil {
				return sluice.Decision{}, err
			}
			p.states[i] = st
		}
	}
	if p.reward {
		return algorithm.Decide(p.limits, p.states, p.raw, p.now, 1, sluice.OpPeek), nil
	}
	return algorithm.Decide(p.limits, p.states, p.raw, p.now, p.cost, sluice.OpPeek), nil
}

// readForRefund reads the states of p, again while a generation it
// learns of moved meanwhile, at most s.retries times more.
func (s *Store) readForRefund(ctx context.Context, c *meta.Client, p *plan, b *meta.Batch) error {
	for attempt := 0; ; attempt++ {
		if attempt > s.retries {
			return ErrContention
		}
		b.Reset()
		p.appendRead(b, false)
		if err := c.Do(ctx, b); err != nil {
			return err
		}
		redo, err := p.readReplies(b, false)
		if err != nil || !redo {
			return err
		}
		s.learnGens(p)
	}
}

// refundCounters gives back p.cost, taken at at, from the bucket
// counters of p's counter parts, in one batch of decrements.
func refundCounters(ctx context.Context, c *meta.Client, p *plan, b *meta.Batch, at int64) error {
	b.Reset()
	for i := range p.parts {
		pt := &p.parts[i]
		if !pt.counter || !pt.headFound {
			continue
		}
		before := p.states[i]
		after := slices.Clone(before)
		p.giveBack(pt, after, at)
		for j := int64(0); j <= pt.view; j++ {
			idx := pt.target - pt.view + j
			w := 1
			if pt.view > 0 {
				w = slot(pt.view, idx)
			}
			if diff := before[w] - after[w]; diff > 0 {
				b.Decr(bucketKey(pt.base, pt.gen, idx), uint64(diff))
			}
		}
		p.states[i] = after
	}
	if b.Len() == 0 {
		return nil
	}
	if err := c.Do(ctx, b); err != nil {
		return err
	}
	for j := range b.Replies {
		if r := &b.Replies[j]; r.Status != meta.StatusOK && r.Status != meta.StatusNotFound {
			return unexpected(r)
		}
	}
	return nil
}

// reset forgets the state under every limit in one round trip: a counter
// limit's head starts a new generation, so its old counters are never
// read again; a GCRA or sliding log state is deleted. It answers what a
// peek of 1 gets on the fresh states (see sluice.Store).
func (s *Store) reset(ctx context.Context, c *meta.Client, p *plan, b *meta.Batch) (sluice.Decision, error) {
	s.forgetDenial(p)
	b.Reset()
	for i := range p.parts {
		pt := &p.parts[i]
		if pt.counter {
			gen := rand.Uint64() | 1
			b.Set(headKey(pt.base), headValue(gen, 0), pt.headTTLAfterReset(p))
			s.setGen(pt.base, gen)
		} else {
			b.Delete(stateKey(pt.base))
			s.dropState(pt.base)
		}
	}
	if err := c.Do(ctx, b); err != nil {
		return sluice.Decision{}, err
	}
	for j := range b.Replies {
		if r := &b.Replies[j]; r.Status != meta.StatusOK && r.Status != meta.StatusNotFound {
			return sluice.Decision{}, unexpected(r)
		}
	}
	for i, l := range p.limits {
		p.states[i] = make([]int64, algorithm.Words(l))
	}
	return algorithm.Decide(p.limits, p.states, p.raw, p.now, 1, sluice.OpPeek), nil
}

// wrap makes err an error of the store, wrapping sluice.ErrStore; errors
// of the connection already name the server.
func wrap(err error) error {
	if errors.Is(err, sluice.ErrStore) {
		return err
	}
	return fmt.Errorf("%w: %w", sluice.ErrStore, err)
}
