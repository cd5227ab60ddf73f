package memcachedbans

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/banfield"
	"github.com/sluicehq/sluice/internal/meta"
)

// Defaults of Config.
const (
	// DefaultPrefix names the registry's items when Config.Prefix is
	// empty.
	DefaultPrefix = "sluice:bans"
	// DefaultPages is how many pages hold the bans when Config.Pages is
	// zero: at memcached's 1 MB items, room for about 128 MB of bans.
	DefaultPages = 128
	// DefaultPollEvery is how often a replica looks for changes when
	// Config.PollEvery is zero.
	DefaultPollEvery = time.Second
)

// Internal bounds.
const (
	// maxAttempts bounds the writes of one page that may lose to other
	// processes' in one sync.
	maxAttempts = 10
	// closeFlush bounds Close's last attempt to write pending changes.
	closeFlush = 2 * time.Second
)

// Config configures a Registry. The zero value of each field but Addrs
// means its default.
type Config struct {
	// Addrs are the memcached servers, "host:port" each: the pages are
	// spread over them, in the sorted order of their addresses. At least
	// one; give every process the same.
	Addrs []string
	// Prefix names the registry: its items are "Prefix:page:0", … .
	// Processes that share a Prefix share the bans. Default DefaultPrefix.
	Prefix string
	// Pages is how many items hold the bans, each at most one memcached
	// item (1 MB by default). Give every process the same. Default
	// DefaultPages.
	Pages int
	// Limits bound the bans this process holds (guard.BanSet): give
	// every process of a fleet the same. Default: the zero
	// guard.BanLimits, its defaults.
	Limits guard.BanLimits
	// Spare is the list whose addresses no coarsening covers (the allow
	// list; see guard.BanSet.Spare), from the first load on. Default
	// none.
	Spare *guard.List
	// PollEvery is how often the replica reads the pages' versions (one
	// multi-get per server) and the pages that changed: how long a ban
	// made elsewhere takes, at most, to be enforced here. Default
	// DefaultPollEvery.
	PollEvery time.Duration
	// Timeout bounds one round trip to a server. Default 1s.
	Timeout time.Duration
	// Clock stamps this process's changes (the latest stamp wins), and
	// judges lapsed entries. Default time.Now. Keep the fleet's clocks in
	// step (NTP): two changes of one ban closer than the skew may be
	// ordered by it.
	Clock func() time.Time
}

// A Registry is a guard.Registry over memcached, which evicts and cannot
// enumerate keys: the bans live in a fixed number of pages, each one
// memcached item holding the bans of the jails and keys that hash to it,
// updated by compare-and-set. Every process holds a replica in a
// guard.BanSet and enforces from it; it polls the pages' versions (their
// CAS tokens, one multi-get per server, which also keeps the pages at
// the hot end of memcached's LRU) and reads again the pages that
// changed.
//
// # Merging
//
// A page is a set of entries, bans and lifts, each stamped by the clock
// of the process that wrote it; any two copies of a page merge entry by
// entry, the newer stamp winning, and lapsed entries are dropped. So the
// latest change of a jail and key wins in every process, whatever order
// they see the changes in, and a lift (an entry kept until the lifted
// ban would have ended) is never undone by a process that still held the
// ban. A coarsening at capacity writes the network ban, then lifts the
// bans merged into it with the network's key, which a replica covers
// before it lifts them. A merge elsewhere that made room for a ban is
// written before the ban.
//
// # Eviction
//
// A process that finds a page missing (evicted, or its server restarted)
// or lacking an entry it knows writes the merged page back: a ban is lost
// only if memcached evicts it and every process that held it stops. A
// change that memcached fails is enforced here at once and written at
// the next poll that succeeds.
//
// The zero value is not usable; create Registries with New and stop them
// with Close. A Registry is safe for concurrent use.
type Registry struct {
	clients   []*meta.Client // by server, sorted by address
	keys      []string       // of the pages
	pollEvery time.Duration
	clock     func() time.Time
	set       guard.BanSet
	pageMu    []sync.Mutex // one sync of a page at a time

	mu     sync.Mutex
	pages  []page   // each page as this process knows it
	tokens []uint64 // each page's CAS token when last read or written; 0: none
	dirty  []uint64 // per page, the generation of its changes not yet written (0: none)
	gen    uint64
	stamp  int64 // the last stamp given

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	polls, writes, conflicts, restored atomic.Int64
}

var _ guard.Registry = (*Registry)(nil)

// New returns a Registry on c.Addrs holding every ban memcached holds,
// and starts its replica polling for the changes of other processes. The
// pages of a server that does not answer are loaded by the first poll it
// answers. The error wraps sluice.ErrInvalidRequest for a bad Config.
func New(ctx context.Context, c Config) (*Registry, error) {
	if len(c.Addrs) == 0 {
		return nil, fmt.Errorf("%w: memcachedbans: no Addrs", sluice.ErrInvalidRequest)
	}
	c.Prefix = cmp.Or(c.Prefix, DefaultPrefix)
	c.Pages = cmp.Or(max(c.Pages, 0), DefaultPages)
	if err := meta.CheckKey(c.Prefix + ":page:" + strconv.Itoa(c.Pages)); err != nil {
		return nil, fmt.Errorf("%w: memcachedbans: prefix %q: %w", sluice.ErrInvalidRequest, c.Prefix, err)
	}
	r := &Registry{pollEvery: cmp.Or(max(c.PollEvery, 0), DefaultPollEvery), clock: c.Clock,
		set: guard.BanSet{BanLimits: c.Limits}, pageMu: make([]sync.Mutex, c.Pages),
		pages: make([]page, c.Pages), tokens: make([]uint64, c.Pages), dirty: make([]uint64, c.Pages),
		done: make(chan struct{})}
	if r.clock == nil {
		r.clock = time.Now
	}
	r.set.Spare(c.Spare)
	for _, a := range slices.Compact(slices.Sorted(slices.Values(c.Addrs))) {
		r.clients = append(r.clients, meta.New(meta.Config{Addr: a, Timeout: c.Timeout}))
	}
	for p := range r.pages {
		r.keys = append(r.keys, c.Prefix+":page:"+strconv.Itoa(p))
		r.pages[p] = page{}
	}
	_ = r.poll(ctx) // what fails is loaded by a later poll
	pctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.run(pctx)
	return r, nil
}

// Close stops the replica, makes a last attempt, within a few seconds,
// to write the changes memcached has not taken (the error wraps
// sluice.ErrStore if some are left), and closes the connections.
func (r *Registry) Close() error {
	r.closeOnce.Do(func() {
		r.cancel()
		<-r.done
		ctx, cancel := context.WithTimeout(context.Background(), closeFlush)
		defer cancel()
		if err := r.flush(ctx); err != nil {
			r.closeErr = fmt.Errorf("%w: memcachedbans: close: %w", sluice.ErrStore, err)
		}
		for _, c := range r.clients {
			c.Close()
		}
	})
	return r.closeErr
}

// Bans returns the set this process enforces from.
func (r *Registry) Bans() *guard.BanSet { return &r.set }

// Put records b in this process's set, then in its page, replacing any
// ban of the same jail and key. It returns the ban as recorded (see
// guard.BanSet.Put). If memcached fails, the ban is enforced here all
// the same and written at the next poll; the error wraps sluice.ErrStore.
func (r *Registry) Put(ctx context.Context, b guard.Ban) (guard.Ban, error) {
	r.mu.Lock()
	rec, m, err := r.set.PutMerged(b, time.Time{})
	if err != nil {
		r.mu.Unlock()
		return rec, fmt.Errorf("memcachedbans: %w", err)
	}
	var pages []int
	if m.Into.Key != "" && (m.Into.Key != rec.Key || m.Into.Jail != rec.Jail) { // a merge elsewhere made room
		pages = r.noteBan(m.Into, m.Merged)
		m = guard.Merge{}
	}
	for _, p := range r.noteBan(rec, m.Merged) {
		if !slices.Contains(pages, p) {
			pages = append(pages, p)
		}
	}
	r.mu.Unlock()
	for _, p := range pages {
		if err := r.syncPage(ctx, p, nil); err != nil {
			return rec, fmt.Errorf("%w: memcachedbans: put (enforced here, to be written again): %w", sluice.ErrStore, err)
		}
	}
	return rec, nil
}

// Delete lifts the ban of key in jail, here and in memcached. The error
// wraps guard.ErrNotBanned if neither held one in force, and
// sluice.ErrStore if memcached failed (the ban is lifted here all the
// same, and the lift written at the next poll).
func (r *Registry) Delete(ctx context.Context, jail, key string) error {
	key = guard.BanKey(key)
	f := banfield.Name(jail, key)
	p := pageOf(f, len(r.keys))
	rd, serr := r.readPage(ctx, p) // learn of a ban made elsewhere since the last poll
	if serr == nil {
		serr = r.syncPage(ctx, p, rd)
	}
	r.mu.Lock()
	now := r.clock()
	until := time.Time{}
	if b, ok := r.set.Get(jail, key); ok && b.Until.After(now) {
		until = b.Until
	}
	if e, ok := r.pages[p][f]; ok && !e.lifted && e.ban.Until.After(now) && e.ban.Until.After(until) {
		until = e.ban.Until
	}
	if until.IsZero() {
		r.mu.Unlock()
		if serr != nil {
			return fmt.Errorf("%w: memcachedbans: lift: %w", sluice.ErrStore, serr)
		}
		return fmt.Errorf("memcachedbans: %w: %q in jail %q", guard.ErrNotBanned, key, jail)
	}
	r.set.Delete(jail, key)
	r.note(f, entry{ban: guard.Ban{Jail: jail, Key: key, Until: until}, lifted: true, stamp: r.nextStamp()})
	r.mu.Unlock()
	if err := r.syncPage(ctx, p, nil); err != nil {
		return fmt.Errorf("%w: memcachedbans: lift (lifted here, to be written again): %w", sluice.ErrStore, err)
	}
	return nil
}

// List reads the pages that changed (repairing those memcached lost) and
// returns the bans in force at now, by jail and key.
func (r *Registry) List(ctx context.Context, now time.Time) ([]guard.Ban, error) {
	if err := r.poll(ctx); err != nil {
		return nil, fmt.Errorf("%w: memcachedbans: list: %w", sluice.ErrStore, err)
	}
	r.mu.Lock()
	var out []guard.Ban
	for _, pg := range r.pages {
		for _, e := range pg {
			if !e.lifted && e.ban.Until.After(now) {
				out = append(out, e.ban)
			}
		}
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b guard.Ban) int {
		return cmp.Or(strings.Compare(a.Jail, b.Jail), strings.Compare(a.Key, b.Key))
	})
	return out, nil
}

// Stats are a Registry's counts, beside those of its set (Bans().Stats).
type Stats struct {
	// Pending is how many pages hold changes of this process that
	// memcached has not taken yet.
	Pending int
	// Polls counts the rounds of reading the pages' versions; Writes the
	// pages written; Conflicts the writes another process's beat.
	Polls, Writes, Conflicts int64
	// Restored counts pages found missing (evicted, or their server
	// restarted) and written back.
	Restored int64
}

// Stats returns the registry's counts.
func (r *Registry) Stats() Stats {
	r.mu.Lock()
	pending := 0
	for _, g := range r.dirty {
		if g != 0 {
			pending++
		}
	}
	r.mu.Unlock()
	return Stats{Pending: pending, Polls: r.polls.Load(), Writes: r.writes.Load(), Conflicts: r.conflicts.Load(), Restored: r.restored.Load()}
}
