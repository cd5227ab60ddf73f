package simulate

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"net/netip"
	"runtime"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/simulate/accesslog"
)

// A replay decides on several workers at once when that cannot change
// a decision: each worker is a Replayer of its own (a Service on a
// memory store of its own, at the time of the entry it decides), and
// decides the requests of a share of the clients, in log order. What a
// decision depends on is then in one worker: a key holds the client's
// address (forward_auth.key has "ip"), so its states, its jails and its
// bans (an address, an IPv6 network of at most ipv6_prefix bits, or an
// adaptive prefix of at most /48) belong to one client network, and the
// workers split the clients by network (IPv4 addresses, IPv6 /48s or
// ipv6_prefix when shorter). The tallies of the workers merge at the end.

// Sizes of the queues between the reader and the workers.
const (
	parcelLen   = 512      // entries sent to a worker at once
	parcelBytes = 64 << 10 // bytes of their fields, copied
	queueLen    = 4        // parcels queued per worker
)

// ErrNotParallel means a replay was asked for several workers where
// they could decide differently from one: keys that are not the
// client's, or a comparison.
var ErrNotParallel = errors.New("simulate: this replay decides on one worker only")

// workers returns how many workers replay o: o.Workers, or by default as
// many as the processors when the replay can be split, else one.
func workers(o Options) (int, error) {
	if o.Config.Rules == nil {
		return 1, nil // NewReplayer says what is missing
	}
	split := o.Compare == nil && keyedByClient(o.Config.Rules.ForwardAuth)
	switch {
	case o.Workers > 1 && !split && o.Compare != nil:
		return 0, fmt.Errorf("%w: -compare replays in log order on one worker", ErrNotParallel)
	case o.Workers > 1 && !split:
		return 0, fmt.Errorf("%w: forward_auth.key %v is not keyed by the client's address (\"ip\"), so clients share keys and only a replay in log order decides as serve would", ErrNotParallel, o.Config.Rules.ForwardAuth.Key)
	case o.Workers > 0:
		return o.Workers, nil
	case split:
		return runtime.GOMAXPROCS(0), nil
	}
	return 1, nil
}

// keyedByClient reports whether every key of forward-auth holds the
// client's address.
func keyedByClient(fa config.ForwardAuth) bool {
	return slices.Contains(fa.Key, "ip")
}

// A pool decides entries on workers, each the Replayer of a share of
// the clients. The reader copies each entry's fields that deciding reads
// into a parcel of its worker; full parcels queue to the worker, and
// come back empty. Memory is bounded by the parcels: workers ×
// (queueLen+2) of parcelLen entries and parcelBytes of fields (more for
// a line longer than that, up to the line's cap).
type pool struct {
	reps  []*Replayer
	in    []chan *parcel
	cur   []*parcel
	free  chan *parcel
	done  sync.WaitGroup
	part  *partitioner
	uri   bool // copy URIs: a key or a route reads them
	needs needs
}

// A parcel is entries on their way to a worker, their fields copied
// into arena, and their client addresses as strings (interned by the
// partitioner, so that the worker need not find them again).
type parcel struct {
	entries []accesslog.Entry
	addrs   []clientAddr
	arena   []byte
}

// A clientAddr is an entry's client address as the partitioner interned
// it, and its slot in the partitioner's cache, which is its slot in the
// worker's address cache too: the worker neither hashes it again nor,
// while the partitioner keeps the same string, compares its bytes.
type clientAddr struct {
	s    string
	slot int
}

// newPool starts n workers replaying c.
func newPool(ctx context.Context, c Config, n int) (*pool, error) {
	p := &pool{in: make([]chan *parcel, n), cur: make([]*parcel, n), free: make(chan *parcel, n*(queueLen+2))}
	seed := maphash.MakeSeed()
	for range n {
		r, err := newReplayer(ctx, c, seed, int64(n))
		if err != nil {
			p.close()
			return nil, err
		}
		p.reps = append(p.reps, r)
	}
	r := p.reps[0]
	p.needs = r.needs
	p.uri = r.needs.uri || slices.ContainsFunc(r.routes, func(rs *ruleStats) bool { return rs.route.PathPrefix != "" })
	p.part = newPartitioner(c.Rules.ForwardAuth, r.proxy, n)
	for range cap(p.free) {
		p.free <- &parcel{entries: make([]accesslog.Entry, 0, parcelLen), addrs: make([]clientAddr, 0, parcelLen), arena: make([]byte, 0, parcelBytes)}
	}
	for i := range n {
		p.in[i], p.cur[i] = make(chan *parcel, queueLen), <-p.free
		p.done.Add(1)
		go p.work(ctx, i)
	}
	return p, nil
}

// work decides the parcels of worker i.
func (p *pool) work(ctx context.Context, i int) {
	defer p.done.Done()
	r := p.reps[i]
	for pc := range p.in[i] {
		for j := range pc.entries {
			a := &pc.addrs[j]
			r.decide(ctx, &pc.entries[j], r.cache().at(a.s, a.slot))
		}
		clear(pc.addrs)
		pc.entries, pc.addrs, pc.arena = pc.entries[:0], pc.addrs[:0], pc.arena[:0]
		p.free <- pc
	}
}

// add sends e to the worker of its client.
func (p *pool) add(e *accesslog.Entry) {
	w, addr := p.part.worker(e)
	if !p.cur[w].add(e, addr, p.uri, &p.needs) {
		p.in[w] <- p.cur[w]
		p.cur[w] = <-p.free
		p.cur[w].add(e, addr, p.uri, &p.needs)
	}
}

// finish sends what is left, waits for the workers and merges their
// tallies into the first worker's Replayer, which it returns.
func (p *pool) finish() *Replayer {
	for i, pc := range p.cur {
		if len(pc.entries) > 0 {
			p.in[i] <- pc
		}
		close(p.in[i])
	}
	p.done.Wait()
	a := p.reps[0]
	for _, r := range p.reps[1:] {
		a.merge(r)
	}
	return a
}

// close closes the workers' Replayers.
func (p *pool) close() {
	for _, r := range p.reps {
		r.Close()
	}
}

// add copies e, whose client address is addr, into the parcel: the fields a
// Replayer reads (uri and needs say which); or it reports false when the
// parcel is full. An empty parcel takes any entry, growing its arena for
// a long line.
func (pc *parcel) add(e *accesslog.Entry, addr clientAddr, uri bool, n *needs) bool {
	size := len(e.Addr) + len(e.Forwarded) + len(e.URI) + len(e.Method) + len(e.Host) + len(e.UserAgent) + len(e.Referer) + len(e.User)
	if len(pc.entries) > 0 && (len(pc.entries) == cap(pc.entries) || len(pc.arena)+size > cap(pc.arena)) {
		return false
	}
	if size > cap(pc.arena)-len(pc.arena) {
		pc.arena = make([]byte, 0, size)
	}
	c := accesslog.Entry{Time: e.Time, Status: e.Status, Source: e.Source, Line: e.Line}
	c.Addr, c.Forwarded = pc.put(e.Addr), pc.put(e.Forwarded)
	if uri {
		c.URI = pc.put(e.URI)
	}
	if n.method {
		c.Method = pc.put(e.Method)
	}
	if n.host {
		c.Host = pc.put(e.Host)
	}
	if n.agent {
		c.UserAgent = pc.put(e.UserAgent)
	}
	if n.referer {
		c.Referer = pc.put(e.Referer)
	}
	if n.user {
		c.User = pc.put(e.User)
	}
	pc.entries, pc.addrs = append(pc.entries, c), append(pc.addrs, addr)
	return true
}

// put copies b into the arena, which has room for it.
func (pc *parcel) put(b []byte) []byte {
	start := len(pc.arena)
	pc.arena = append(pc.arena, b...)
	return pc.arena[start:len(pc.arena):len(pc.arena)]
}

// A partitioner tells the worker of an entry: by its client's address,
// found as forward-auth finds it (behind the trusted proxies), an IPv6
// client by its network of v6 bits; a client that cannot be told is
// worker 0's, as all such requests share the key "unknown". It caches
// the workers of recent addresses in a table of fixed size.
type partitioner struct {
	n     uint64
	ip    httplimit.ClientIP
	peer  netip.Addr
	v6    int
	seed  maphash.Seed
	cache [addrCacheSize]struct {
		addr   string
		worker int
	}
}

func newPartitioner(fa config.ForwardAuth, proxy string, n int) *partitioner {
	peer, _ := netip.ParseAddrPort(proxy)
	v6 := 48 // the widest prefix of ipv6_adaptive
	if fa.IPv6Prefix > 0 {
		v6 = min(v6, fa.IPv6Prefix)
	}
	return &partitioner{n: uint64(n), ip: httplimit.ClientIP{TrustedProxies: fa.TrustedProxies}, peer: peer.Addr(), v6: v6, seed: maphash.MakeSeed()}
}

// worker returns the worker of e, and e.Addr as a string with its slot.
func (p *partitioner) worker(e *accesslog.Entry) (int, clientAddr) {
	i := int(maphash.Bytes(p.seed, e.Addr) & (addrCacheSize - 1))
	c := &p.cache[i]
	if c.addr != string(e.Addr) || c.addr == "" {
		c.addr = string(e.Addr)
		c.worker = p.of([]string{c.addr})
	}
	if len(e.Forwarded) > 0 {
		return p.of([]string{string(e.Forwarded), c.addr}), clientAddr{c.addr, i}
	}
	return c.worker, clientAddr{c.addr, i}
}

// of returns the worker of the client behind the hops.
func (p *partitioner) of(hops []string) int {
	a, ok := p.ip.AddrFrom(p.peer, hops)
	if !ok {
		return 0
	}
	var b [16]byte
	if a.Is4() {
		b4 := a.As4()
		copy(b[:], b4[:])
	} else {
		net, _ := a.Prefix(p.v6)
		b = net.Addr().As16()
	}
	return int(maphash.Bytes(p.seed, b[:]) % p.n)
}
