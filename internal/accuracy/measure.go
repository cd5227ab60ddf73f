package accuracy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// A Result is what one trace did to one limit in one store.
type Result struct {
	// Limit is the limit measured; Trace the name of the trace.
	Limit sluice.Limit
	Trace string
	// Requests is the number of takes applied; Admitted how many the
	// store allowed.
	Requests, Admitted int
	// MaxInWindow is the most units admitted to one actor in any window
	// of length Period, at effective times, found by an exact sweep.
	MaxInWindow int
	// MaxAtRequestTimes is the same count over the times the requests
	// carried rather than their effective times: what an observer who
	// trusts the callers' clocks would see. No bound is promised on it.
	MaxAtRequestTimes int
	// Bound is the most the limit's algorithm states it admits in any
	// window of length Period (see statedBound).
	Bound int
	// Over counts takes the store allowed that the oracle denies; Under,
	// takes it denied that the oracle allows.
	Over, Under int
	// OverExact counts takes the store allowed that the algorithm itself
	// (package algorithm on a state of unbounded life, fed the takes the
	// store admitted) denies; UnderExact, takes it denied that the
	// algorithm allows. Unlike Over and Under, they do not count how the
	// algorithm strays from the oracle's exact semantics: they show what
	// the store's bounded memory changes.
	OverExact, UnderExact int
	// Exact is the number of takes the algorithm alone, with unbounded
	// memory, admits on the same trace in its own run (set by
	// RunEviction; 0 elsewhere).
	Exact int
	// OverBound counts windows (for GCRA, intervals of any length) that
	// hold more than the algorithm's stated bound: it must be zero.
	OverBound int
	// Full counts takes the store failed with sluice.ErrStoreFull, which
	// count as denied (failing closed) but not as under-admitted.
	Full int
	// InOrder reports whether every actor's request times never went
	// backwards in the trace.
	InOrder bool
}

// Check returns an error naming every stated property of r.Limit's
// algorithm that r shows broken, or nil:
//
//   - every algorithm: no window over its stated bound (OverBound is 0);
//   - GCRA, FixedWindow, SlidingWindow and SlidingLog: nothing admitted
//     that their oracle denies (Over is 0);
//   - FixedWindow: nothing denied that its oracle allows (it is exactly
//     counters per aligned window, also when time goes backwards);
//   - SlidingLog, and GCRA when Rate divides Period: nothing denied that
//     the oracle allows on a trace whose times run forwards (backwards
//     times are judged at the request's own time, which is stricter).
func (r Result) Check() error {
	var errs []string
	if r.OverBound > 0 {
		errs = append(errs, fmt.Sprintf("%d windows over the stated bound %d (max %d)", r.OverBound, r.Bound, r.MaxInWindow))
	}
	if r.Over > 0 && r.Limit.Algorithm != sluice.ApproxSlidingWindow {
		errs = append(errs, fmt.Sprintf("%d takes over-admitted", r.Over))
	}
	exact := r.Limit.Algorithm == sluice.FixedWindow ||
		r.InOrder && (r.Limit.Algorithm == sluice.SlidingLog ||
			r.Limit.Algorithm == sluice.GCRA && r.Limit.Period%time.Duration(r.Limit.Rate) == 0)
	if r.Under > 0 && exact {
		errs = append(errs, fmt.Sprintf("%d takes under-admitted", r.Under))
	}
	if errs == nil {
		return nil
	}
	return fmt.Errorf("%v on %s: %v", r.Limit, r.Trace, errs)
}

// Measure applies tr to store as takes under the single limit l, one after
// another, and compares every decision with the oracle of l's algorithm.
//
// A take's effective time is the later of its own time and the latest
// time of an admitted take of the same actor: package algorithm treats a
// time that went backwards as the latest time it has seen, so that is the
// time the take counts at. The oracle decides at the effective time, and
// windows are measured over effective times. Requests carry an empty
// Prefix: a trace's keys are the actors' full names, from which a
// staggered window's offset is computed. Give each measurement an empty
// store, or traces whose keys no other measurement uses.
func Measure(ctx context.Context, store sluice.Store, l sluice.Limit, tr Trace) (Result, error) {
	res := Result{Limit: l, Trace: tr.Name, Bound: statedBound(l), InOrder: true}
	type actor struct {
		o      oracle
		exact  []int64 // the algorithm's state of the store's admitted takes
		off    int64   // the staggered window offset of the key
		latest int64   // latest time of an admitted take
		last   int64   // time of the last request
		units  units   // effective times of admitted units
		stamps units   // request times of admitted units, unsorted
	}
	actors := map[string]*actor{}
	var keys []string
	req := sluice.Request{Limits: []sluice.Limit{l}}
	for i, r := range tr.Requests {
		req.Key, req.Cost, req.Now = r.Key, r.Cost, time.Unix(0, r.Now)
		if r.Filler {
			if _, err := store.Decide(ctx, req); err != nil && !errors.Is(err, sluice.ErrStoreFull) {
				return res, fmt.Errorf("accuracy: %s request %d: %w", tr.Name, i, err)
			}
			continue
		}
		res.Requests++
		a := actors[r.Key]
		if a == nil {
			o, err := newOracle(l, r.Key)
			if err != nil {
				return res, err
			}
			a = &actor{o: o, exact: make([]int64, algorithm.Words(l)), off: algorithm.Offset(l, r.Key)}
			actors[r.Key] = a
			keys = append(keys, r.Key)
		}
		if r.Now < a.last {
			res.InOrder = false
		}
		a.last = r.Now
		d, err := store.Decide(ctx, req)
		full := errors.Is(err, sluice.ErrStoreFull)
		if err != nil && !full {
			return res, fmt.Errorf("accuracy: %s request %d: %w", tr.Name, i, err)
		}
		e := max(r.Now, a.latest)
		want := a.o.allows(e, r.Cost)
		exact := algorithm.Check(l, a.exact, r.Now-a.off, r.Cost).Allowed
		switch {
		case full:
			res.Full++
		case d.Allowed && !want:
			res.Over++
		case !d.Allowed && want:
			res.Under++
		}
		switch {
		case full:
		case d.Allowed && !exact:
			res.OverExact++
		case !d.Allowed && exact:
			res.UnderExact++
		}
		if d.Allowed {
			algorithm.Commit(l, a.exact, r.Now-a.off, r.Cost)
			res.Admitted++
			a.o.admit(e, r.Cost)
			a.units.add(e, r.Cost)
			a.stamps.add(r.Now, r.Cost)
			a.latest = e
		}
	}
	for _, k := range keys {
		a := actors[k]
		res.MaxInWindow = max(res.MaxInWindow, maxInWindow(a.units, int64(l.Period)))
		res.OverBound += boundViolations(l, k, a.units)
		slices.Sort(a.stamps)
		res.MaxAtRequestTimes = max(res.MaxAtRequestTimes, maxInWindow(a.stamps, int64(l.Period)))
	}
	return res, nil
}

// A NewStore returns an empty store for one measurement and a function
// that releases it.
type NewStore func() (sluice.Store, func(), error)

// Direct is the NewStore of the algorithms as they are: a store that
// applies algorithm.Decide to states kept in a map, never evicting or
// expiring one, so that what is measured is the algorithm alone.
func Direct() (sluice.Store, func(), error) {
	return &directStore{states: map[stateName][]int64{}}, func() {}, nil
}

// directStore keeps the state of each key and limit (by StateID) in a
// map. It takes and peeks; it does not refund or reset. It is safe for
// concurrent use.
type directStore struct {
	mu      sync.Mutex
	states  map[stateName][]int64
	scratch [][]int64 // the request's states, reused under mu
}

type stateName struct {
	key string
	id  uint64
}

func (s *directStore) Decide(_ context.Context, r sluice.Request) (sluice.Decision, error) {
	if err := r.Validate(); err != nil {
		return sluice.Decision{}, err
	}
	if r.Op != sluice.OpTake && r.Op != sluice.OpPeek {
		return sluice.Decision{}, fmt.Errorf("%w: the direct store only takes and peeks", sluice.ErrInvalidRequest)
	}
	if r.Now.IsZero() {
		return sluice.Decision{}, fmt.Errorf("%w: the direct store has no clock; set Request.Now", sluice.ErrInvalidRequest)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	states := append(s.scratch[:0], make([][]int64, len(r.Limits))...)
	s.scratch = states
	for i, l := range r.Limits {
		name := stateName{r.Prefix + r.Key, l.StateID()}
		st := s.states[name]
		if st == nil {
			st = make([]int64, algorithm.Words(l))
		}
		st = algorithm.Fit(l, st)
		s.states[name] = st
		states[i] = st
	}
	// Prefix+Key names the actor, also for a staggered window's offset.
	d := algorithm.Decide(r.Limits, states, r.Prefix+r.Key, r.Now.UnixNano(), r.Cost, r.Op)
	d.Time = r.Now
	return d, nil
}
