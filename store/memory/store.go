package memory

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"
	"unsafe"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// DefaultMaxBytes is the memory cap of a Store whose Config.MaxBytes is
// zero: about 3 million GCRA actors held with keys of up to 30 bytes,
// and about 11 million more remembered once evicted (see the package
// documentation).
const DefaultMaxBytes = 256 << 20

// Config configures a Store. The zero value of every field means its
// default.
type Config struct {
	// MaxBytes caps the memory the store holds, as it counts it: the
	// chunks of slots its tables allocated, used or not, their indexes,
	// the keys it keeps apart from their slots (a GCRA key longer than 30
	// bytes, less its Prefix, or of states larger than a word), the
	// Prefixes its GCRA slots number, by Go's allocation sizes (what it
	// counts is within 4% to 25% above the heap it holds, measured by
	// TestBytesCountsHeap), and the ledgers of evicted states, which may
	// take three eighths of it (see the package documentation). A GCRA
	// state whose Key is up to 30 bytes counts about 55 bytes held, about
	// 9 remembered. The process's garbage comes on top: see MemoryLimit.
	// Default 0: DefaultMaxBytes. Negative: no cap.
	MaxBytes int64
	// Shards is the number of independently locked parts of the store,
	// rounded up to a power of two. Default 0: 16 per GOMAXPROCS, at
	// least 64.
	Shards int
	// SweepInterval is how often a background goroutine drops the states
	// that are back to empty. Default 0: one minute. Negative: no sweeper
	// (states are then dropped only to make room under MaxBytes).
	SweepInterval time.Duration
	// Clock gives the time of requests whose Now is zero. Default nil:
	// the wall time at New plus the monotonic time elapsed since, which
	// costs one clock read instead of time.Now's two and never jumps when
	// the wall clock is stepped (a step would look to a limiter like time
	// running backwards or leaping ahead), read at Resolution.
	Clock func() time.Time
	// Resolution is how stale the default clock may be, to spare most
	// requests a clock read (tens of nanoseconds on virtual machines, a
	// third of a decision): while the store is busy, a goroutine reads the
	// clock every Resolution and requests take its latest reading. Only
	// requests whose every limit spans ten resolutions or more do so: a
	// GCRA limit that refills its whole burst in 10 ms or more, a window
	// (or a sliding window counter's bucket) of 10 ms or more, at the
	// default. Limits hold exactly on the readings, which trail the true
	// time by at most Resolution plus the goroutine's scheduling delay (a
	// window on the true clock may see that lag's refill more or less).
	// Default 0: DefaultResolution (1 ms). Negative: read the clock for
	// every request. Ignored when Clock is set.
	Resolution time.Duration
}

// sweepLag is how far behind the newest time a shard has seen the sweeper
// judges states, so that a request whose Now lags that much (a goroutine
// that read the clock and was scheduled late) still finds the state it
// would have found.
const sweepLag = time.Second

// A Store keeps limiter state in the memory of one process: the embedded
// default store of sluice.
//
// Keys are spread over shards by a hash of Prefix+Key; each shard has
// its own mutex, and a key's states under every limit of a policy live in
// one shard, so a multi-limit decision is atomic. Decide on a key that
// exists allocates nothing. A GCRA state whose Key is up to 30 bytes
// takes about 50 bytes, key included.
//
// States that are back to empty are dropped by a background sweeper
// every SweepInterval. Under MaxBytes, a shard that has no room for a new
// state first drops the states of a random sample that are back to empty,
// then the sampled state whose eviction costs least, into the ledger of
// its Prefix, which charges the actor what it had spent if it returns
// (see the package documentation): a full store never over-admits, keeps
// deciding, and keeps what one rule's actors cost apart from another's.
// Decide fails with sluice.ErrStoreFull, changing nothing, only when a
// request's states alone need more than MaxBytes.
//
// Expiry follows the newest request time each shard has seen (and the
// clock, once a request has used it), so a store driven by explicit
// request times — a replay of last week's log — expires states on that
// timeline. Decide ignores its context: it never waits on I/O.
//
// Create Stores with New; the zero value is not usable. A Store is safe
// for concurrent use. Close stops its sweeper and its clock's goroutine.
type Store struct {
	shards       []shard
	mask         uint64
	maxBytes     int64
	stateCap     int64        // what the states may count: MaxBytes less the ledgers' share
	ledgerBudget int64        // what each shard's ledgers may count
	bytes        atomic.Int64 // counted bytes of every state
	ledgerBytes  atomic.Int64 // counted bytes of every ledger
	seed         maphash.Seed
	userClock    func() time.Time // Config.Clock, or nil for clk
	clk          *clock
	usesClock    atomic.Bool
	leases       leaseShards // the concurrency leases: see lease.go
	quotas       quotaShards // the edge quotas' shares: see quota.go

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

var _ sluice.Store = (*Store)(nil)

// A shard is one lock's worth of the store. Every field is guarded by mu.
type shard struct {
	mu          sync.Mutex
	store       *Store
	tables      []*table
	hw          int64 // newest request time seen, Unix ns
	states      int   // number of states
	ledgerBytes int64 // what the shard's ledgers count
	added       int   // inserts since the last full sweep
	rng         uint64

	// Scratch space, reused by every request under mu.
	key       []byte // Prefix+Key of the request being decided
	pre       int    // the length of its Prefix
	hash      uint64 // its hash
	best      []byte // the key of the state an eviction would drop
	list      [][]int64
	tabs      []*table
	missing   []bool
	charged   bool // a missing state was charged from a ledger's cells, not empty
	forgotten bool // a missing state, safe to forget, was not found apart in a ledger whose cells charge
	tgt       []*table
	zeros     []int64

	_ [64]byte // keep neighbouring shards' locks off one cache line
}

// New returns a Store configured by c, with its sweeper running.
func New(c Config) *Store {
	n := c.Shards
	if n <= 0 {
		n = max(64, 16*runtime.GOMAXPROCS(0))
	}
	n = 1 << bits.Len(uint(n-1))
	s := &Store{
		shards:    make([]shard, n),
		mask:      uint64(n - 1),
		maxBytes:  c.MaxBytes,
		seed:      maphash.MakeSeed(),
		userClock: c.Clock,
	}
	switch {
	case c.MaxBytes == 0:
		s.maxBytes = DefaultMaxBytes
	case c.MaxBytes < 0:
		s.maxBytes = math.MaxInt64
	}
	s.stateCap = s.maxBytes
	if c.MaxBytes >= 0 {
		s.stateCap -= s.maxBytes / 8 * ledgerShare
		s.ledgerBudget = s.maxBytes / 8 * ledgerShare / int64(n)
	}
	res := c.Resolution
	if res == 0 {
		res = DefaultResolution
	}
	s.clk = newClock(res)
	s.leases.init(s.maxBytes)
	s.quotas.init(s.maxBytes)
	for i := range s.shards {
		s.shards[i].store = s
		s.shards[i].rng = uint64(i)*0x9e3779b97f4a7c15 + 1
	}
	interval := c.SweepInterval
	if interval == 0 {
		interval = time.Minute
	}
	if interval > 0 {
		s.stop, s.done = make(chan struct{}), make(chan struct{})
		go s.sweeper(interval)
	}
	return s
}

// Close stops the sweeper and the clock's goroutine and waits for them
// to exit. The store still decides afterwards, reading the clock for
// every request and dropping states only to make room. Close always
// returns nil; calling it again does nothing.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.stop != nil {
			close(s.stop)
			<-s.done
		}
		s.clk.close()
	})
	return nil
}

// Len returns the number of states the store holds: one per key and
// kind of limit (StateID).
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.states
		sh.mu.Unlock()
	}
	return n
}

// Bytes returns the memory the store counts against Config.MaxBytes: its
// states' and its ledgers'.
func (s *Store) Bytes() int64 { return s.bytes.Load() + s.ledgerBytes.Load() }

// Decide applies r atomically; see sluice.Store. For OpRefund, OpReset and
// OpInsert, the Decision is what a peek would get just after: of Cost for
// a refund, of 1 for a reset or an insert (a key the store may have evicted stays
// charged by its ledger). The error wraps sluice.ErrInvalidRequest,
// sluice.ErrInvalidLimit or sluice.ErrCostExceedsBurst for an invalid
// request, and sluice.ErrStoreFull when a take's new states alone need
// more than MaxBytes (see Store).
func (s *Store) Decide(_ context.Context, r sluice.Request) (sluice.Decision, error) {
	if err := r.Validate(); err != nil {
		return sluice.Decision{}, err
	}
	var d sluice.Decision
	err := s.decide(&r, s.hash(r.Prefix, r.Key), r.Now.IsZero() && s.clk.fits(r.Limits), &d)
	return d, err
}

// decide applies the valid request r, whose name hashes to h, at the
// coarse clock if coarse and r has no Now, and writes its decision to d
// (in place: each copy of a Decision costs a hot path a few percent).
func (s *Store) decide(r *sluice.Request, h uint64, coarse bool, d *sluice.Decision) error {
	var now int64
	if r.Now.IsZero() {
		now = s.now(coarse)
		if !s.usesClock.Load() {
			s.usesClock.Store(true)
		}
	} else {
		now = r.Now.UnixNano()
	}
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	err := sh.decide(r, h, now, d)
	// Still under the lock: the unlock's atomic instruction commits every
	// store to d, so that copying d out does not stall on one in flight.
	d.Time = r.Now
	if d.Time.IsZero() {
		d.Time = time.Unix(0, now)
	}
	sh.mu.Unlock()
	if err != nil {
		*d = sluice.Decision{}
	}
	return err
}

// Bind returns the Bound of prefix and limits, nil unless as is s; see
// sluice.Binder. Its requests skip checking the limits and choosing the
// clock: a Limiter's decisions on this store go through it.
func (s *Store) Bind(as sluice.Store, prefix string, limits []sluice.Limit) (sluice.Bound, error) {
	r := sluice.Request{Limits: limits, Op: sluice.OpReset}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if st, ok := as.(*Store); !ok || st != s {
		return nil, nil
	}
	canon := unique.Make(prefix)
	b := &bound{s: s, prefix: canon.Value(), canon: canon, limits: slices.Clone(limits), maxCost: math.MaxInt, coarse: s.clk.fits(limits),
		cut: strings.HasSuffix(prefix, string(sep)), ph: maphash.String(s.seed, prefix),
		gcra: len(limits) == 1 && limits[0].Algorithm == sluice.GCRA}
	b.slots = !b.gcra && slotted(limits)
	for i := range b.limits {
		b.kinds = append(b.kinds, kindOf(&b.limits[i]))
	}
	if b.gcra {
		b.interval = int64(limits[0].Interval())
		b.tau = b.interval * int64(limits[0].MaxBurst())
	}
	for _, l := range limits {
		b.maxCost = min(b.maxCost, l.MaxBurst())
	}
	return b, nil
}

// A bound is a Store's Bound.
type bound struct {
	s             *Store
	prefix        string                // canon's value: the copy the store's tables keep
	canon         unique.Handle[string] // keeps prefix the canonical copy while b lives
	limits        []sluice.Limit
	kinds         []kind // of limits
	maxCost       int    // the least MaxBurst of limits
	coarse        bool   // limits fit the coarse clock
	cut           bool   // prefix ends with sep
	ph            uint64 // the hash of prefix, if cut
	gcra          bool   // limits are one GCRA limit
	slots         bool   // limits are not one GCRA limit, and each has its state in a slot (see slotted)
	interval, tau int64  // if gcra: its interval and tolerance, ns (see algorithm.GCRAAt)
}

func (b *bound) Decide(_ context.Context, key string, op sluice.Op, cost int, now time.Time) (d sluice.Decision, err error) {
	h := b.hashOf(key)
	checked := op <= sluice.OpPeek && b.checked(cost, now)
	if checked && (b.gcra || b.slots) {
		// What does not depend on the state, before the lock: on a key
		// out of every cache, the work left once its state arrives is
		// what delays the next decisions.
		at := b.at(now)
		if now.IsZero() {
			d.Time = time.Unix(0, at)
		} else {
			d.Time = now
		}
		if b.gcra && b.hit(key, h, op, cost, at, &d) || b.slots && b.hitAll(key, h, op, cost, at, &d) {
			return d, nil
		}
	}
	// Field by field: a composite literal would be built aside and copied,
	// and reading the fresh stores back stalls the copy.
	var r sluice.Request
	r.Prefix, r.Key, r.Limits, r.Op, r.Cost, r.Now = b.prefix, key, b.limits, op, cost, now
	if !checked {
		if err := r.Validate(); err != nil {
			return d, err
		}
	}
	err = b.s.decide(&r, h, b.coarse, &d)
	return d, err
}

// Admit decides a take of cost at now as Decide does, and reports
// whether it was allowed: a key the store holds under one GCRA limit is
// decided as hit decides it, without the details of a Decision (what
// remains, the waits), which cost more than the decision itself on a hot
// key. Its own copy of hit's steps: hit asked for a bool through a nil
// Decision took 1.7 ns more of Admit's 32.5 on a hot key (medians of
// eight alternating runs).
func (b *bound) Admit(ctx context.Context, key string, cost int, now time.Time) (bool, error) {
	if b.gcra && b.checked(cost, now) {
		h, at := b.hashOf(key), b.at(now)
		sh := &b.s.shards[h&b.s.mask]
		sh.mu.Lock()
		w, held := sh.tableOf(b.kinds[0], &b.limits[0]).lookupOne(b.prefix, key, h)
		allowed := false
		if held {
			sh.hw = max(sh.hw, at)
			var next int64
			if next, allowed = algorithm.GCRATake(b.interval, b.tau, w.state[0], at, cost); allowed {
				w.state[0] = next
			}
		}
		sh.mu.Unlock()
		if held {
			return allowed, nil
		}
	}
	d, err := b.Decide(ctx, key, sluice.OpTake, cost, now)
	return d.Allowed, err
}

// hashOf returns the hash of b.prefix+key, as b.s.hash does.
func (b *bound) hashOf(key string) uint64 {
	if b.cut && keySplits(key) {
		return mix(b.ph, maphash.String(b.s.seed, key)) // b.s.hash's first case, less hashing prefix
	}
	return b.s.hash(b.prefix, key)
}

// checked reports whether a take or peek of cost at now needs no check:
// its limits were checked by Bind, its cost is here, and the store's
// clock (a zero now) or a time of this century is one every request may
// carry.
func (b *bound) checked(cost int, now time.Time) bool {
	return cost >= 1 && cost <= b.maxCost && (now.IsZero() || plainTime(now))
}

// at returns the time of a request at now, Unix ns: now's, or the
// store's clock's if now is zero.
func (b *bound) at(now time.Time) int64 {
	if !now.IsZero() {
		return now.UnixNano()
	}
	if !b.s.usesClock.Load() {
		b.s.usesClock.Store(true)
	}
	return b.s.now(b.coarse)
}

// plainTime reports whether t is a time no request is refused for:
// between 2000 and 2100, well inside Request.Validate's range.
func plainTime(t time.Time) bool {
	sec := t.Unix()
	return sec >= plainFrom && sec < plainTo
}

// The range of plainTime, Unix seconds.
const (
	plainFrom = 946684800  // 2000-01-01
	plainTo   = 4102444800 // 2100-01-01
)

// hit decides the take or peek of cost by the one GCRA limit of b on key,
// whose name hashes to h, at now (Unix ns), if the store holds key's
// state, and writes the decision to d, whose Time is set: decideGCRA's
// common case, without building a Request. It reports whether it did.
func (b *bound) hit(key string, h uint64, op sluice.Op, cost int, now int64, d *sluice.Decision) bool {
	s := b.s
	sh := &s.shards[h&s.mask]
	l := &b.limits[0]
	d.Limit = *l
	sh.mu.Lock()
	t := sh.tableOf(b.kinds[0], l)
	w, ok := t.lookupOne(b.prefix, key, h)
	if ok {
		sh.hw = max(sh.hw, now)
		next := algorithm.GCRAAt(b.interval, b.tau, w.state[0], now, cost, d)
		if op == sluice.OpTake && d.Allowed {
			w.state[0] = next
		}
	}
	sh.mu.Unlock()
	return ok
}

// hitAll is hit for the limits of b, each of a state in a slot (windows,
// or several limits): it decides the take or peek if the store holds
// every one of key's states, without building a Request or the key's
// name. A state missing (new, or evicted and perhaps charged by a
// ledger) takes decideAll's way.
func (b *bound) hitAll(key string, h uint64, op sluice.Op, cost int, now int64, d *sluice.Decision) bool {
	var states [maxSlotted][]int64
	sh := &b.s.shards[h&b.s.mask]
	at := d.Time
	sh.mu.Lock()
	for i := range b.limits {
		s, ok := sh.tableOf(b.kinds[i], &b.limits[i]).lookup(b.prefix, key, h)
		if !ok {
			sh.mu.Unlock()
			return false
		}
		states[i] = s
	}
	sh.hw = max(sh.hw, now)
	*d = algorithm.Decide(b.limits, states[:len(b.limits)], "", now, cost, op)
	sh.mu.Unlock()
	d.Time = at
	return true
}

// maxSlotted is the most limits a Bound decides by hitAll.
const maxSlotted = 4

// slotted reports whether limits are at most maxSlotted, with their
// states in slots found by their key alone: no sliding log (which is kept
// by name, and fitted to its Rate when found) and no staggered fixed
// window (whose windows start by its key's whole name).
func slotted(limits []sluice.Limit) bool {
	if len(limits) > maxSlotted {
		return false
	}
	for _, l := range limits {
		if l.Algorithm == sluice.SlidingLog || l.Staggered && l.Algorithm == sluice.FixedWindow {
			return false
		}
	}
	return true
}

// now returns the time of the store's clock in Unix nanoseconds: the
// default clock's latest coarse reading if coarse, else an exact one.
func (s *Store) now(coarse bool) int64 {
	switch {
	case s.userClock != nil:
		return s.userClock().UnixNano()
	case coarse:
		return s.clk.coarse()
	}
	return s.clk.exact()
}

// sep is the byte whose last occurrence in a state's name cuts it in two
// parts the store hashes apart, when the last part is splitMin bytes or
// longer. A Limiter's prefix ends with sep, so the name of such a key
// without it is hashed without being built. An IPv6 address ends in a
// group of at most 4 bytes, or a /length: its name is hashed whole.
const (
	sep      = ':'
	splitMin = 5
)

// hash returns the hash of the name prefix+key, the same wherever the cut
// between prefix and key falls (a sluice.Store names a state by
// Prefix+Key): the hashes of the name's parts before and after its last
// sep, mixed, if the last part is splitMin bytes or longer, else the
// hash of the whole name. Only a part that straddles the cut is copied to
// be hashed, which costs more than the hash (whose wide loads stall on
// the copy's narrow stores).
func (s *Store) hash(prefix, key string) uint64 {
	if strings.HasSuffix(prefix, string(sep)) && keySplits(key) {
		return mix(maphash.String(s.seed, prefix), maphash.String(s.seed, key))
	}
	if i := strings.LastIndexByte(key, sep); i >= 0 {
		if len(key)-i-1 >= splitMin {
			return mix(s.joined(prefix, key[:i+1]), maphash.String(s.seed, key[i+1:]))
		}
		return s.joined(prefix, key)
	}
	if i := strings.LastIndexByte(prefix, sep) + 1; i > 0 && len(prefix)-i+len(key) >= splitMin {
		return mix(maphash.String(s.seed, prefix[:i]), s.joined(prefix[i:], key))
	}
	return s.joined(prefix, key)
}

// keySplits reports whether key, after a prefix that ends with sep, is
// the last part of its name that hash hashes apart: it holds no sep and
// is splitMin bytes or longer.
func keySplits(key string) bool { return len(key) >= splitMin && strings.IndexByte(key, sep) < 0 }

// mix returns the hash of a name from the hashes of its two parts: one
// 64×64→128-bit multiply folded, as wyhash mixes.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a^0xa0761d6478bd642f, b^0xe7037ed1a0b428db)
	return hi ^ lo
}

// joined returns the maphash of prefix+key.
func (s *Store) joined(prefix, key string) uint64 {
	if len(prefix)+len(key) <= 64 {
		var buf [64]byte
		n := copy(buf[:], prefix)
		n += copy(buf[n:], key)
		return maphash.Bytes(s.seed, buf[:n])
	}
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(prefix)
	h.WriteString(key)
	return h.Sum64()
}

// table returns the shard's table for l's kind, creating it if need be.
func (sh *shard) table(l *sluice.Limit) *table { return sh.tableOf(kindOf(l), l) }

// tableOf is table, for l of kind k.
func (sh *shard) tableOf(k kind, l *sluice.Limit) *table {
	for _, t := range sh.tables {
		if t.kind == k {
			return t
		}
	}
	t := newTable(*l, sh.store.hash)
	sh.tables = append(sh.tables, t)
	return t
}

// decide applies r at now to the shard's states and writes the decision
// to d (in place: a Decision is large to copy). It requires sh.mu.
func (sh *shard) decide(r *sluice.Request, h uint64, now int64, d *sluice.Decision) error {
	sh.hw = max(sh.hw, now)
	sh.hash = h
	sh.charged, sh.forgotten = false, false
	var err error
	if len(r.Limits) == 1 && r.Limits[0].Algorithm == sluice.GCRA && r.Op < sluice.OpReset {
		err = sh.decideGCRA(r, now, d)
	} else {
		sh.setKey(r)
		err = sh.decideAll(r, now, d)
		sh.trimScratch()
	}
	d.Estimated = sh.charged && !d.Allowed // decided from cells other keys share
	d.Forgotten = sh.forgotten
	return err
}

// recall writes to s, the fresh state under l of the key of r, named
// name, missing from t, what t's ledger remembers of it at now, and notes
// whether it was charged from cells other keys share (or, if r is safe to
// forget, not charged from cells that hold something).
func (sh *shard) recall(t *table, l sluice.Limit, s []int64, r *sluice.Request, name string, now int64) {
	if !t.recall(l, s, r.Prefix, name, sh.hash, r.SafeToForget, now) {
		return
	}
	if r.SafeToForget {
		sh.forgotten = true
	} else {
		sh.charged = true
	}
}

// setKey makes sh.key the name of r's state, Prefix+Key: what a request
// that may add or drop states needs (and what sweeps spare meanwhile).
func (sh *shard) setKey(r *sluice.Request) {
	sh.key = append(append(sh.key[:0], r.Prefix...), r.Key...)
	sh.pre = len(r.Prefix)
}

// name returns sh.key as a string without copying it: valid until the
// next setKey, so only within the request (a table clones what it keeps).
func (sh *shard) name() string { return unsafe.String(unsafe.SliceData(sh.key), len(sh.key)) }

// decideGCRA is decideAll for the common case of one GCRA limit, whose
// state is a single word found without building the key's name.
func (sh *shard) decideGCRA(r *sluice.Request, now int64, d *sluice.Decision) error {
	l := &r.Limits[0]
	t := sh.table(l)
	w, ok := t.lookupOne(r.Prefix, r.Key, sh.hash)
	var tat int64
	switch {
	case ok:
		tat = w.state[0]
	case t.ledgers != nil: // the key may have been evicted: charge it
		sh.zeros = append(sh.zeros[:0], 0)
		sh.recall(t, *l, sh.zeros[:1], r, "", now)
		tat = sh.zeros[0]
	}
	if r.Op == sluice.OpRefund {
		if !ok {
			// Nothing held to give back to: what a peek would get.
			algorithm.GCRA(l, tat, now, r.Cost, d)
			return nil
		}
		algorithm.Refund(*l, w.state[:], r.At.UnixNano(), now, r.Cost)
		tat = w.state[0]
	}
	next := algorithm.GCRA(l, tat, now, r.Cost, d)
	if r.Op != sluice.OpTake || !d.Allowed {
		return nil
	}
	if ok {
		w.state[0] = next
		return nil
	}
	sh.setKey(r)
	defer sh.trimScratch()
	key := sh.name()
	sh.tabs, sh.missing = append(sh.tabs[:0], t), append(sh.missing[:0], true)
	if err := sh.makeRoom(key, r.Limits); err != nil {
		return err
	}
	sh.zeros = append(sh.zeros[:0], next)
	sh.add(t, key, sh.zeros[:1])
	return nil
}

// decideAll applies r under every limit of its policy, all or nothing.
func (sh *shard) decideAll(r *sluice.Request, now int64, d *sluice.Decision) error {
	name := sh.name()
	words := sh.gather(r, name, now)
	states := sh.list
	switch r.Op {
	case sluice.OpPeek:
		*d = algorithm.Decide(r.Limits, states, name, now, r.Cost, sluice.OpPeek)
		return nil
	case sluice.OpRefund:
		algorithm.RefundAll(r.Limits, states, name, r.At.UnixNano(), now, r.Cost)
		*d = algorithm.Decide(r.Limits, states, name, now, r.Cost, sluice.OpPeek)
		return nil
	case sluice.OpReset:
		for i, t := range sh.tabs {
			if !sh.missing[i] {
				sh.drop(t, "", name, sh.hash, states[i])
			}
			// The peek below sees what a take would: a fresh state, but
			// for what the ledger's cells charge every key of theirs.
			clear(states[i])
			t.forgetKey(r.Prefix, sh.hash)
			if t.ledgers != nil {
				t.recall(r.Limits[i], states[i], r.Prefix, name, sh.hash, r.SafeToForget, now)
			}
		}
		*d = algorithm.Decide(r.Limits, states, name, now, 1, sluice.OpPeek)
		return nil
	case sluice.OpInsert:
		return sh.insert(r, name, now, words, d)
	}
	if words == 0 {
		*d = algorithm.Decide(r.Limits, states, name, now, r.Cost, sluice.OpTake)
		return nil
	}
	*d = algorithm.Decide(r.Limits, states, name, now, r.Cost, sluice.OpPeek)
	if !d.Allowed {
		return nil
	}
	return sh.insertNew(r, name, now)
}

// insert applies the insert r at now to the states of its key, named name,
// that gather found (words of them missing), and writes to d what a peek
// of 1 gets after. A penalty adds the missing states; a reward leaves
// them out, a fresh state having nothing to give back.
func (sh *shard) insert(r *sluice.Request, name string, now int64, words int, d *sluice.Decision) error {
	var err error
	if r.Cost > 0 && words > 0 {
		err = sh.insertNew(r, name, now)
	} else {
		algorithm.InsertAll(r.Limits, sh.list, name, now, r.Cost)
	}
	if err == nil {
		*d = algorithm.Decide(r.Limits, sh.list, name, now, 1, sluice.OpPeek)
	}
	return err
}

// gather looks up the states of r's key, named name, under each limit of
// r into sh.list, their tables into sh.tabs, and which are missing into
// sh.missing, and returns how many words the missing ones take. A missing
// state is a fresh one, zeros or what its table's ledger remembers at now
// of a key it may have evicted, in scratch space: inserted only if a take
// commits to it (that state is what a peek, a refund or a reset of it
// leaves).
func (sh *shard) gather(r *sluice.Request, name string, now int64) int {
	sh.list, sh.tabs, sh.missing = sh.list[:0], sh.tabs[:0], sh.missing[:0]
	words := 0
	for i, l := range r.Limits {
		t := sh.table(&r.Limits[i])
		s, ok, delta := t.get(name, sh.pre, sh.hash, l)
		if delta != 0 { // a log fitted to a new Rate; else spare the shared counter
			sh.store.bytes.Add(delta)
		}
		if !ok {
			words += algorithm.Words(l)
		}
		sh.list, sh.tabs, sh.missing = append(sh.list, s), append(sh.tabs, t), append(sh.missing, !ok)
	}
	if cap(sh.zeros) < words {
		sh.zeros = make([]int64, words)
	}
	zeros := sh.zeros[:words]
	clear(zeros)
	for i, t := range sh.tabs {
		if sh.missing[i] {
			w := algorithm.Words(r.Limits[i])
			sh.list[i], zeros = zeros[:w:w], zeros[w:]
			if t.ledgers != nil { // it may have been evicted
				sh.recall(t, r.Limits[i], sh.list[i], r, name, now)
			}
		}
	}
	return words
}

// insertNew commits the take r, allowed at now, or the penalty r, to the
// states of its key, named name, that sh.list holds, and inserts the
// missing ones, after making room for them.
func (sh *shard) insertNew(r *sluice.Request, name string, now int64) error {
	if err := sh.makeRoom(name, r.Limits); err != nil {
		return err
	}
	if r.Op == sluice.OpInsert {
		algorithm.InsertAll(r.Limits, sh.list, name, now, r.Cost)
	} else {
		for i, l := range r.Limits {
			algorithm.Commit(l, sh.list[i], now-algorithm.Offset(l, name), r.Cost)
		}
	}
	for i, t := range sh.tabs {
		if sh.missing[i] {
			t.limit = r.Limits[i]
			sh.add(t, name, sh.list[i])
		}
	}
	return nil
}

// add inserts the state s of the request's key, named key (sh.name()),
// into t and counts it. What t's ledger remembered of the key, if any,
// is in s now: the ledger lets go of it.
func (sh *shard) add(t *table, key string, s []int64) {
	room := sh.store.stateCap - sh.store.bytes.Load()
	sh.store.bytes.Add(t.insert(key[:sh.pre], key[sh.pre:], sh.hash, s, room))
	sh.states++
	sh.added++
	if t.ledgers != nil {
		t.forgetKey(key[:sh.pre], sh.hash)
	}
}

// drop removes the state s of prefix+key, whose hash is h, from t and
// uncounts it.
func (sh *shard) drop(t *table, prefix, key string, h uint64, s []int64) {
	sh.store.bytes.Add(-t.remove(prefix, key, h, s))
	sh.states--
}

// trimScratch lets go of scratch space a huge key or log left behind.
func (sh *shard) trimScratch() {
	if cap(sh.key) > 64<<10 {
		sh.key = nil
	}
	if cap(sh.zeros) > 64<<10 {
		sh.zeros = nil
	}
	if cap(sh.best) > 64<<10 {
		sh.best = nil
	}
	clear(sh.list) // do not keep states alive through the scratch list
	clear(sh.tabs)
	clear(sh.tgt)
}

// errFull is the error of a request whose states alone exceed the cap.
func errFull(need, maxBytes int64) error {
	return fmt.Errorf("%w: memory store: the request's states need %d bytes, more than the %d MaxBytes leaves for states", sluice.ErrStoreFull, need, maxBytes)
}
