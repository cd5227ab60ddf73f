package memcached

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// What a Store remembers in its process: locks that serialise an actor's
// compare-and-set requests, the generation of counters after a reset, and
// recent denials. None of it decides anything: the state is memcached's.

// lock returns the mutex that serialises, within this process, the
// requests that compare-and-set an actor's state, so that its goroutines
// never lose races to each other: only other processes can make a
// request retry.
func (s *Store) lock(name string) *sync.Mutex {
	h := uint32(2166136261)
	for i := 0; i < len(name); i++ {
		h = (h ^ uint32(name[i])) * 16777619
	}
	return &s.locks[h%uint32(len(s.locks))]
}

// A denial remembers that an actor's take under a policy was denied
// until a time, so that its next takes before then are decided by a peek
// first (see decide). It only chooses the order of round trips: the
// decision is always the store's.
type denial struct {
	raw    string
	policy uint64
	until  int64
}

func (s *Store) denialSlot(p *plan) (*atomic.Pointer[denial], uint64) {
	h := uint64(14695981039346656037)
	mix := func(v uint64) { h = (h ^ v) * 1099511628211 }
	for i := 0; i < len(p.raw); i++ {
		mix(uint64(p.raw[i]))
	}
	slot := &s.denials[h%uint64(len(s.denials))]
	policy := uint64(p.cost)
	for _, l := range p.limits {
		policy = (policy ^ l.StateID() ^ uint64(l.Rate)<<20 ^ uint64(l.Burst)) * 1099511628211
	}
	return slot, policy
}

func (s *Store) recentlyDenied(p *plan) bool {
	slot, policy := s.denialSlot(p)
	e := slot.Load()
	return e != nil && e.raw == p.raw && e.policy == policy && p.now < e.until
}

func (s *Store) rememberDenial(p *plan, d sluice.Decision) {
	slot, policy := s.denialSlot(p)
	slot.Store(&denial{raw: p.raw, policy: policy, until: p.now + int64(d.RetryAfter)})
}

func (s *Store) forgetDenial(p *plan) {
	slot, _ := s.denialSlot(p)
	if e := slot.Load(); e != nil && e.raw == p.raw {
		slot.CompareAndSwap(e, nil)
	}
}

// genEntry remembers a counter limit's generation, so that after a reset
// the actor's requests aim at the right keys in one round trip.
type genEntry struct {
	base string
	gen  uint64
}

func (s *Store) genSlot(base string) *atomic.Pointer[genEntry] {
	h := uint32(2166136261)
	for i := 0; i < len(base); i++ {
		h = (h ^ uint32(base[i])) * 16777619
	}
	return &s.gens[h%uint32(len(s.gens))]
}

func (s *Store) gen(base string) uint64 {
	if e := s.genSlot(base).Load(); e != nil && e.base == base {
		return e.gen
	}
	return 0
}

func (s *Store) setGen(base string, gen uint64) {
	slot := s.genSlot(base)
	if gen == 0 {
		if e := slot.Load(); e != nil && e.base == base {
			slot.CompareAndSwap(e, nil)
		}
		return
	}
	slot.Store(&genEntry{base, gen})
}

func (s *Store) learnGens(p *plan) {
	for i := range p.parts {
		if pt := &p.parts[i]; pt.counter {
			s.setGen(pt.base, pt.gen)
		}
	}
}

// backoff waits a random while, longer after each lost race, so that
// processes contending for one state spread out.
func backoff(attempt int) {
	d := time.Duration(20<<min(attempt, 8)) * time.Microsecond
	time.Sleep(rand.N(d) + time.Microsecond)
}

// A casEntry remembers the last GCRA or sliding log state this process
// read or wrote for one limit of one actor, with its CAS token, so that
// the next take can write without reading first (see decideCached). A
// stale entry costs a lost compare-and-set, never a wrong decision.
type casEntry struct {
	base string
	enc  []byte
	cas  uint64
}

func (s *Store) casSlot(base string) *atomic.Pointer[casEntry] {
	h := uint32(2166136261)
	for i := 0; i < len(base); i++ {
		h = (h ^ uint32(base[i])) * 16777619
	}
	return &s.states[h%uint32(len(s.states))]
}

func (s *Store) cachedState(base string) *casEntry {
	if e := s.casSlot(base).Load(); e != nil && e.base == base {
		return e
	}
	return nil
}

// cacheState remembers enc (copied) as base's state with token cas.
func (s *Store) cacheState(base string, enc []byte, cas uint64) {
	s.casSlot(base).Store(&casEntry{base: base, enc: slices.Clone(enc), cas: cas})
}

func (s *Store) dropState(base string) {
	slot := s.casSlot(base)
	if e := slot.Load(); e != nil && e.base == base {
		slot.CompareAndSwap(e, nil)
	}
}
