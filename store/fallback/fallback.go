package fallback

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

// Config configures a Store. The zero value of every field but Primary
// means its default.
type Config struct {
	// Primary is the store that decides while it works: store/redis,
	// store/memcached or any other. Required.
	Primary sluice.Store
	// Policy is what is answered while the primary fails:
	// sluice.FailLocal (decide on Local, and replay into the primary),
	// FailOpen or FailClosed. Default FailOpen, the zero FailurePolicy:
	// set FailLocal to keep limiting while the primary is gone.
	Policy sluice.FailurePolicy
	// Timeout bounds each call of the primary; a call that takes longer
	// counts as a failure and gets the policy's answer. Default 100ms;
	// negative means none (the caller's context only).
	Timeout time.Duration
	// Threshold is how many failures in a row open the circuit breaker:
	// while it is open the primary is not called, so requests do not wait
	// for timeouts. Default 5.
	Threshold int
	// Cooldown is how long the breaker stays open before one request
	// probes the primary; if the probe succeeds the breaker closes.
	// Default 250ms, so a primary that returns is used again within
	// about a quarter of a second.
	Cooldown time.Duration
	// Local is the store of policy FailLocal. Default nil: a store/memory
	// Store of default size, closed by Close.
	Local sluice.Store
	// Instances is how many processes share the primary. Under policy
	// FailLocal each limit's Rate and Burst are divided by it (rounded up),
	// so that the fleet, each process limiting alone, admits about what
	// the shared limit would. Default 1.
	Instances int
	// MaxReplay bounds the operations journaled under policy FailLocal to
	// replay into the primary when it answers again: the takes allowed
	// locally, the resets, and the refunds of takes the journal does not
	// hold. Beyond it the oldest are dropped (counted in Stats.Dropped).
	// Default 10000; negative means no journal: the primary never learns
	// what was decided locally.
	MaxReplay int
	// DenyCache is how many actors known to be denied until some time
	// are kept, to answer their requests of the same cost and policy
	// locally, without a round trip, until then. Default 10000; negative
	// disables it. See Store for what it may change.
	DenyCache int
	// OnError, if set, is called with every failure of the primary (not
	// with invalid requests), from the goroutine of the request: keep it
	// quick. Default nil.
	OnError func(error)
	// OnBreaker, if set, is called when the breaker opens (true) or
	// closes (false). Default nil.
	OnBreaker func(open bool)
	// Clock is the time of the breaker and the deny cache. Default nil:
	// time.Now.
	Clock func() time.Time
}

// Stats counts what a Store did since it was created.
type Stats struct {
	Errors          int64 // failures of the primary (timeouts included)
	Degraded        int64 // requests answered by the policy
	Opens           int64 // times the breaker opened
	DenyHits        int64 // requests answered by the deny cache
	Replayed        int64 // local takes replayed into the primary
	ReplayedResets  int64 // resets decided locally, replayed into the primary
	ReplayedRefunds int64 // refunds decided locally, replayed into the primary
	ReplayFailed    int64 // journaled operations whose replay failed
	Dropped         int64 // journaled operations dropped beyond MaxReplay
}

// A Store decides on a primary store and applies a failure policy when
// the primary fails (an error wrapping sluice.ErrStore, or no answer
// within Timeout): fail open, fail closed, or decide locally and replay
// the local takes into the primary when it is back. A circuit breaker
// stops calling a primary that keeps failing and probes it every
// Cooldown. Answers of the policy are Decisions with a nil error, so
// every caller applies them; failures are reported to OnError and
// counted in Stats. Invalid requests return their errors as they are.
//
// Under FailLocal, the Store journals what the primary must learn when it
// answers again (the takes allowed locally, the resets, the refunds of
// takes the primary counted) and replays it in order, from the
// primary's first answer on; a refund of a local take not yet replayed
// cancels it instead. See the package documentation, "The journal".
//
// Under FailOpen, the Decision allows, with the binding limit's full
// allowance less the cost as Remaining. Under FailClosed, it denies, with
// Remaining 0 and RetryAfter the time until the breaker next probes (at
// least one second when the breaker is closed).
//
// The deny cache remembers, per actor (Prefix+Key), the last denial of a
// take or peek and its RetryAfter; a request of the same cost and policy
// before then is denied locally, with the cached Remaining (a lower bound:
// nothing refills a denied actor faster than it was told) and ResetAfter
// and RetryAfter shortened by the time elapsed. It never admits what the
// primary would deny: its only error is to deny an actor that another
// process reset or refunded meanwhile, for at most the cached RetryAfter
// (plus the skew between this host's clock and the primary's). Resets and
// refunds through this Store clear the actor's entry.
//
// Create Stores with New; the zero value is not usable. A Store is safe
// for concurrent use; it starts a goroutine only to replay local takes,
// one at a time.
type Store struct {
	c       Config
	local   sluice.Store
	ownsLoc bool

	mu       sync.Mutex // guards the breaker
	fails    int
	open     bool
	openedAt time.Time
	probing  bool

	journal   journal
	replaying atomic.Bool
	replayWG  sync.WaitGroup
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	deny denyCache

	errors, degraded, opens, denyHits atomic.Int64

	replayed, replayedResets, replayedRefunds, replayFailed atomic.Int64
}

var (
	_ sluice.Store   = (*Store)(nil)
	_ sluice.Batcher = (*Store)(nil)
)

// New returns a Store on c.Primary.
func New(c Config) (*Store, error) {
	if c.Primary == nil {
		return nil, fmt.Errorf("%w: fallback: nil primary", sluice.ErrInvalidRequest)
	}
	if !c.Policy.Valid() {
		return nil, fmt.Errorf("%w: fallback: unknown policy %v", sluice.ErrInvalidRequest, c.Policy)
	}
	if c.Timeout == 0 {
		c.Timeout = 100 * time.Millisecond
	}
	if c.Threshold <= 0 {
		c.Threshold = 5
	}
	if c.Cooldown <= 0 {
		c.Cooldown = 250 * time.Millisecond
	}
	if c.Instances <= 0 {
		c.Instances = 1
	}
	if c.MaxReplay == 0 {
		c.MaxReplay = 10000
	}
	if c.DenyCache == 0 {
		c.DenyCache = 10000
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	s := &Store{c: c, local: c.Local, done: make(chan struct{})}
	if c.Policy == sluice.FailLocal && s.local == nil {
		s.local, s.ownsLoc = memory.New(memory.Config{Clock: c.Clock}), true
	}
	s.journal.max = max(c.MaxReplay, 0)
	s.deny.max = max(c.DenyCache, 0)
	return s, nil
}

// Close waits for a replay in progress and closes the local store New
// made. It does not close the primary. Calls after the first return the
// first's result: a Store wrapped around each server of a fleet may be
// closed by the fleet's store and by its owner.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		s.replayWG.Wait()
		if s.ownsLoc {
			if c, ok := s.local.(interface{ Close() error }); ok {
				s.closeErr = c.Close()
			}
		}
	})
	return s.closeErr
}

// Stats returns the counters of s.
func (s *Store) Stats() Stats {
	return Stats{
		Errors: s.errors.Load(), Degraded: s.degraded.Load(), Opens: s.opens.Load(),
		DenyHits: s.denyHits.Load(), Replayed: s.replayed.Load(),
		ReplayedResets: s.replayedResets.Load(), ReplayedRefunds: s.replayedRefunds.Load(),
		ReplayFailed: s.replayFailed.Load(), Dropped: s.journal.dropped.Load(),
	}
}

// Open reports whether the breaker is open: the primary is failing.
func (s *Store) Open() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open
}

// Decide decides r on the primary, or by the policy when the primary
// fails or the breaker is open.
func (s *Store) Decide(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
	if err := r.Validate(); err != nil {
		return sluice.Decision{}, err
	}
	now := s.now(&r)
	if d, done, err := s.early(ctx, &r, now); done {
		return d, err
	}
	call, probe := s.admit(now)
	if !call {
		return s.degrade(ctx, r, now)
	}
	cctx, cancel := s.withTimeout(ctx)
	defer cancel()
	d, err := s.c.Primary.Decide(cctx, r)
	return s.settle(ctx, r, now, d, err, probe)
}

// now returns the time of r: its own, or the Store's clock.
func (s *Store) now(r *sluice.Request) time.Time {
	if r.Now.IsZero() {
		return s.c.Clock()
	}
	return r.Now
}

// withTimeout bounds a call of the primary by Timeout.
func (s *Store) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.c.Timeout > 0 {
		return context.WithTimeout(ctx, s.c.Timeout)
	}
	return ctx, func() {}
}

// early answers r without the primary when it can, and reports whether
// it did: a denial the deny cache holds, or the refund of a take allowed
// locally and not yet replayed. Resets and refunds clear the actor's
// cached denial; resets wipe the actor from the journal.
func (s *Store) early(ctx context.Context, r *sluice.Request, now time.Time) (d sluice.Decision, done bool, err error) {
	switch r.Op {
	case sluice.OpRefund:
		s.deny.forget(r.Prefix, r.Key)
		// A take allowed locally and not yet replayed lives only in the
		// local store and the journal: refund it there, so that the
		// replay does not charge the primary for it.
		cancelled, err := s.journal.cancel(ctx, r)
		if err != nil {
			return sluice.Decision{}, true, err
		}
		if cancelled {
			d, err := s.decideLocal(ctx, *r, now)
			return d, true, err
		}
	case sluice.OpReset:
		s.deny.forget(r.Prefix, r.Key)
		if err := s.journal.wipe(ctx, r); err != nil {
			return sluice.Decision{}, true, err
		}
	case sluice.OpInsert:
		// Counted whatever the answer: a cached denial must not stop a
		// penalty reaching the primary, and a reward may end it.
		if r.Cost < 0 {
			s.deny.forget(r.Prefix, r.Key)
		}
	default:
		if d, ok := s.deny.lookup(r, now); ok {
			s.denyHits.Add(1)
			return d, true, nil
		}
	}
	return sluice.Decision{}, false, nil
}

// settle turns the primary's answer to r into the Store's: a decision is
// returned (and a denial cached); a failure of the primary is counted,
// tells the breaker, and gets the policy's answer. probe is whether the
// call was the breaker's probe.
func (s *Store) settle(ctx context.Context, r sluice.Request, now time.Time, d sluice.Decision, err error, probe bool) (sluice.Decision, error) {
	if err == nil {
		s.succeeded(probe)
		if !d.Allowed && (r.Op == sluice.OpTake || r.Op == sluice.OpPeek) {
			s.deny.store(&r, d, now)
		}
		return d, nil
	}
	if ctx.Err() != nil {
		s.release(probe)
		return d, err // the caller gave up: not the primary's fault
	}
	if !errors.Is(err, sluice.ErrStore) && !errors.Is(err, context.DeadlineExceeded) {
		s.release(probe)
		return d, err // an invalid request the primary caught
	}
	s.errors.Add(1)
	if s.c.OnError != nil {
		s.c.OnError(err)
	}
	if !errors.Is(err, sluice.ErrCorruptState) { // one bad key is no outage
		s.failed(probe, now)
	} else {
		s.release(probe)
	}
	return s.degrade(ctx, r, now)
}

// admit reports whether to call the primary, and whether the call is the
// breaker's probe.
func (s *Store) admit(now time.Time) (call, probe bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open {
		return true, false
	}
	if s.probing || now.Sub(s.openedAt) < s.c.Cooldown {
		return false, false
	}
	s.probing = true
	return true, true
}

func (s *Store) succeeded(probe bool) {
	s.mu.Lock()
	wasOpen := s.open
	s.fails, s.open = 0, false
	if probe {
		s.probing = false
	}
	s.mu.Unlock()
	if wasOpen && s.c.OnBreaker != nil {
		s.c.OnBreaker(false)
	}
	// Also after failures too few to open the breaker: a journaled reset
	// replayed only after the next outage would forget what the actor
	// did since.
	if wasOpen || s.journal.waiting.Load() > 0 {
		s.startReplay()
	}
}

func (s *Store) failed(probe bool, now time.Time) {
	s.mu.Lock()
	s.fails++
	opened := false
	if probe {
		s.probing = false
		s.openedAt = now
	} else if !s.open && s.fails >= s.c.Threshold {
		s.open, s.openedAt, opened = true, now, true
	}
	s.mu.Unlock()
	if opened {
		s.opens.Add(1)
		if s.c.OnBreaker != nil {
			s.c.OnBreaker(true)
		}
	}
}

// release ends a probe that told nothing about the primary.
func (s *Store) release(probe bool) {
	if probe {
		s.mu.Lock()
		s.probing = false
		s.mu.Unlock()
	}
}

// degrade answers r by the policy.
func (s *Store) degrade(ctx context.Context, r sluice.Request, now time.Time) (sluice.Decision, error) {
	s.degraded.Add(1)
	l := r.Limits[0]
	switch s.c.Policy {
	case sluice.FailOpen:
		return sluice.Decision{Allowed: true, Limit: l, Remaining: max(l.MaxBurst()-r.Cost, 0), Time: now}, nil
	case sluice.FailClosed:
		wait := time.Second
		s.mu.Lock()
		if s.open {
			wait = max(s.c.Cooldown-now.Sub(s.openedAt), time.Millisecond)
		}
		s.mu.Unlock()
		if r.Op == sluice.OpReset || r.Op == sluice.OpRefund {
			return sluice.Decision{Allowed: true, Limit: l, Time: now}, nil
		}
		return sluice.Decision{Limit: l, ResetAfter: wait, RetryAfter: wait, Time: now}, nil
	}
	d, err := s.decideLocal(ctx, r, now)
	if err == nil && (r.Op == sluice.OpTake && d.Allowed || r.Op >= sluice.OpRefund) {
		// What the primary must learn: a take allowed, a reset, an
		// insert, or the refund of a take it counted (early cancelled
		// the others).
		r.Now = d.Time
		if r.Now.IsZero() {
			r.Now = now
		}
		s.journal.add(r)
	}
	return d, err
}

// decideLocal decides r on the local store with every limit divided among
// the instances.
func (s *Store) decideLocal(ctx context.Context, r sluice.Request, now time.Time) (sluice.Decision, error) {
	orig := r.Limits
	if n := s.c.Instances; n > 1 {
		scaled := make([]sluice.Limit, len(orig))
		for i, l := range orig {
			l.Rate = (l.Rate + n - 1) / n
			if l.Burst > 0 {
				l.Burst = (l.Burst + n - 1) / n
			}
			scaled[i] = l
			if r.Op == sluice.OpInsert {
				r.Cost = max(min(r.Cost, l.MaxBurst()), -l.MaxBurst()) // this instance's share of it
				continue
			}
			if r.Op != sluice.OpReset && r.Cost > l.MaxBurst() {
				// Possible overall, not within this instance's share.
				return sluice.Decision{Limit: orig[i], RetryAfter: orig[i].Period, ResetAfter: orig[i].Period, Time: now}, nil
			}
		}
		r.Limits = scaled
	}
	d, err := s.local.Decide(ctx, r)
	if err != nil {
		return d, err
	}
	for i := range r.Limits {
		if r.Limits[i] == d.Limit {
			d.Limit = orig[i]
			break
		}
	}
	return d, nil
}
