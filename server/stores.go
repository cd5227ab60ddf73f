package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/memcachedbans"
	"github.com/sluicehq/sluice/guard/redisbans"
	"github.com/sluicehq/sluice/store/fallback"
	"github.com/sluicehq/sluice/store/memcached"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/store/redis"
)

// stores is what a Service decides on, opened once and kept across
// reloads: the primary store (memory, Redis or memcached), for a shared
// one the store of each failure policy over it, and the ban registry
// beside it. A configuration wires each of its rules to the store of the
// rule's policy (see Service.build).
type stores struct {
	// primary is the store as configured, without policy: readiness
	// probes ask it directly.
	primary sluice.Store
	// policies holds, for a shared store, the store of each failure
	// policy (sluice.FailOpen, FailLocal, FailClosed) over the primary;
	// nil for the memory store, which cannot fail.
	policies map[sluice.FailurePolicy]sluice.Store
	// registry keeps the bans, apart from the rate states.
	registry guard.Registry
	// jails keeps the jails' counts of failures and offences: for the
	// memory store, a memory store of their own (see
	// config.Guard.MaxStrikes); else the primary's fail-closed store.
	jails sluice.Store
	// localLeases holds, for a shared store, the leases of the
	// concurrency rules that fail local while it fails.
	localLeases sluice.LeaseStore
	closers     []io.Closer
}

// localLeaseBytes is the MaxBytes of the memory store of local leases:
// an eighth of it for leases, tens of thousands.
const localLeaseBytes = 32 << 20

// strikeBytes is the memory the jails' store holds per actor whose
// failures it counts: a sliding log of a few failures with its key in
// its table, or one remembered in its ledger. At 100,000 actors (12.5
// MiB), 100,000 offenders each denied twice by a rule of one an hour,
// with a store of 8 MiB for the rates, were 99.9% banned by a jail of 2
// failures (TestAttackJailUnderFlood).
const strikeBytes = 128

// policy returns the store of failure policy p: the primary itself for
// the memory store.
func (st *stores) policy(p sluice.FailurePolicy) sluice.Store {
	if st.policies == nil {
		return st.primary
	}
	return st.policies[p]
}

// openStores opens the store c names, its failure policies, and its ban
// registry.
func openStores(ctx context.Context, c *config.Config, o Options, m *metrics, log *slog.Logger) (*stores, error) {
	if o.Store != nil {
		return &stores{primary: o.Store, registry: guard.NewMemoryRegistry(banLimits(c.Guard)), jails: o.Store}, nil
	}
	switch c.Store.Type {
	case config.StoreMemory:
		ms := memory.New(memory.Config{MaxBytes: c.Store.Memory.MaxBytes})
		js := memory.New(memory.Config{MaxBytes: strikeBytes * int64(cmp.Or(c.Guard.MaxStrikes, guard.DefaultMaxBans))})
		return &stores{primary: ms, registry: guard.NewMemoryRegistry(banLimits(c.Guard)), jails: js, closers: []io.Closer{ms, js}}, nil
	case config.StoreRedis:
		return openRedis(ctx, c, o.Namespace, m, log)
	case config.StoreMemcached:
		return openMemcached(ctx, c, o.Namespace, m, log)
	}
	return nil, fmt.Errorf("store: %w: unknown store type %q", sluice.ErrInvalidRequest, c.Store.Type)
}

// banLimits returns the bounds of the ban registry that g sets.
func banLimits(g config.Guard) guard.BanLimits {
	return guard.BanLimits{Max: g.MaxBans, MaxKeys: g.MaxKeyBans, CoarsenIPv4: g.CoarsenIPv4, CoarsenIPv6: g.CoarsenIPv6}
}

// allowList returns the networks of g's allow list, which a registry
// that loads bans at its start spares until the service gives it the
// list in force (guard.BanSet.Spare).
func allowList(g config.Guard) *guard.List {
	l := &guard.List{}
	for _, e := range g.Allow {
		l.Add(e)
	}
	return l
}

// openRedis opens the Redis store, its policies, and the ban registry
// beside the state, so that every process enforces, lists and may lift
// the whole fleet's bans.
func openRedis(ctx context.Context, c *config.Config, namespace string, m *metrics, log *slog.Logger) (*stores, error) {
	rc := c.Store.Redis
	tc, err := redisTLS(rc.TLS)
	if err != nil {
		return nil, fmt.Errorf("store: redis: %w", err)
	}
	opt := rueidis.ClientOption{
		TLSConfig:    tc,
		InitAddress:  rc.Addrs,
		Username:     rc.Username,
		Password:     rc.Password,
		SelectDB:     rc.DB,
		DisableCache: true,
		// Batch writes under load, as redis.New does.
		MaxFlushDelay: redis.MaxFlushDelay,
	}
	if rc.Sentinel.Master != "" {
		opt.InitAddress = rc.Sentinel.Addrs
		opt.Sentinel = rueidis.SentinelOption{
			MasterSet: rc.Sentinel.Master, Username: rc.Sentinel.Username, Password: rc.Sentinel.Password,
			TLSConfig:               tc, // one deployment, one authority
			TopologyRefreshInterval: 5 * time.Second,
		}
	}
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("store: redis %v: %w: %w", opt.InitAddress, sluice.ErrStore, err)
	}
	st := &stores{closers: []io.Closer{closerFunc(func() error { client.Close(); return nil })}}
	rs, err := redis.New(redis.Config{Client: client, InFlight: rc.InFlight})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("store: %w", err), st.close())
	}
	st.primary = rs
	// The bans live beside the state, on the same client: every process
	// enforces, lists and may lift the fleet's bans.
	bans, err := redisbans.New(ctx, redisbans.Config{Client: client, Prefix: namespace + ":bans", Limits: banLimits(c.Guard), Spare: allowList(c.Guard)})
	if err != nil {
		return nil, errors.Join(err, st.close())
	}
	st.registry = bans
	st.closers = append(st.closers, bans) // closed before the client
	if st.policies, err = policyStores(rs, "redis", c.Failure, m, log, st); err != nil {
		return nil, errors.Join(err, st.close())
	}
	st.jails = st.policies[sluice.FailClosed]
	st.openLocalLeases()
	return st, nil
}

// openLocalLeases opens the memory store of the leases that fail local.
func (st *stores) openLocalLeases() {
	ls := memory.New(memory.Config{MaxBytes: localLeaseBytes})
	st.localLeases = ls
	st.closers = append(st.closers, ls)
}

// openMemcached opens the memcached store and, per failure policy, a
// route through it whose every server has the policy and a breaker of
// its own: a dead server degrades only the actors placed on it.
func openMemcached(ctx context.Context, c *config.Config, namespace string, m *metrics, log *slog.Logger) (*stores, error) {
	mc := c.Store.Memcached
	ms, err := memcached.New(memcached.Config{Addrs: mc.Addrs, Weights: mc.Weights})
	if err != nil {
		return nil, fmt.Errorf("store: memcached: %w", err)
	}
	st := &stores{primary: ms, closers: []io.Closer{ms}, policies: map[sluice.FailurePolicy]sluice.Store{}}
	// The bans live beside the state, in pages every process replicates.
	bans, err := memcachedbans.New(ctx, memcachedbans.Config{Addrs: mc.Addrs, Prefix: namespace + ":bans", Limits: banLimits(c.Guard), Spare: allowList(c.Guard)})
	if err != nil {
		return nil, errors.Join(err, st.close())
	}
	st.registry = bans
	st.closers = append(st.closers, bans)
	for _, p := range []sluice.FailurePolicy{sluice.FailOpen, sluice.FailLocal, sluice.FailClosed} {
		var werr error
		rt, err := ms.Route(func(addr string, server sluice.Store) sluice.Store {
			s, err := policyStore(p, server, addr, c.Failure, m, log, st)
			werr = errors.Join(werr, err)
			return s
		})
		if err = errors.Join(err, werr); err != nil {
			return nil, errors.Join(fmt.Errorf("store: memcached: %w", err), st.close())
		}
		st.policies[p] = rt
		st.closers = append(st.closers, rt)
	}
	st.jails = st.policies[sluice.FailClosed]
	st.openLocalLeases()
	return st, nil
}

// policyStores returns the store of each failure policy over s.
func policyStores(s sluice.Store, addr string, f config.Failure, m *metrics, log *slog.Logger, st *stores) (map[sluice.FailurePolicy]sluice.Store, error) {
	out := map[sluice.FailurePolicy]sluice.Store{}
	for _, p := range []sluice.FailurePolicy{sluice.FailOpen, sluice.FailLocal, sluice.FailClosed} {
		ps, err := policyStore(p, s, addr, f, m, log, st)
		if err != nil {
			return nil, err
		}
		out[p] = ps
	}
	return out, nil
}

// policyStore returns the store of failure policy p over s, the store of
// addr: open and local through a store/fallback Store each (closed when
// st closes), closed as s itself under a timeout, whose errors the APIs
// answer with 503.
func policyStore(p sluice.FailurePolicy, s sluice.Store, addr string, f config.Failure, m *metrics, log *slog.Logger, st *stores) (sluice.Store, error) {
	if p == sluice.FailClosed {
		return &timeoutStore{s, f.Timeout, m}, nil
	}
	fs, err := fallback.New(fallback.Config{
		Primary:   s,
		Policy:    p,
		Timeout:   f.Timeout,
		Instances: f.Instances,
		OnError:   func(error) { m.storeErrors.Inc() },
		OnBreaker: func(open bool) {
			m.breaker(addr, p, open)
			if open {
				log.Warn("store failing: answering by failure policy", "store", addr, "policy", p.String())
			} else {
				log.Info("store answers again", "store", addr, "policy", p.String())
			}
		},
	})
	if err != nil {
		return nil, err
	}
	m.watchFallback(addr, p, fs)
	st.closers = append(st.closers, fs)
	return fs, nil
}

// close closes what openStores opened, the latest first.
func (st *stores) close() error {
	var errs []error
	for i := len(st.closers) - 1; i >= 0; i-- {
		errs = append(errs, st.closers[i].Close())
	}
	return errors.Join(errs...)
}

// ping tells whether the primary store answers: a peek at a key of its
// own, which costs one round trip and changes nothing.
func (st *stores) ping(ctx context.Context) error {
	_, err := st.primary.Decide(ctx, sluice.Request{
		Prefix: "sluice-readyz:", Key: "ping", Op: sluice.OpPeek, Cost: 1,
		Limits: []sluice.Limit{{Rate: 1, Period: time.Second}},
	})
	return err
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// timeoutStore bounds each call of a store, for the fail-closed policy.
type timeoutStore struct {
	s sluice.Store
	d time.Duration
	m *metrics
}

var _ sluice.Batcher = (*timeoutStore)(nil)

func (t *timeoutStore) Decide(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
	cctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	d, err := t.s.Decide(cctx, r)
	return d, t.failure(ctx, err)
}

// DecideBatch decides rs in one call of the store when it can batch,
// under one timeout, else one Decide each.
func (t *timeoutStore) DecideBatch(ctx context.Context, rs []sluice.Request) ([]sluice.Decision, []error) {
	cctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	ds, errs := sluice.DecideBatch(cctx, t.s, rs)
	for i, err := range errs {
		errs[i] = t.failure(ctx, err)
	}
	return ds, errs
}

// failure counts a failure of the store, and says that a timeout is one.
func (t *timeoutStore) failure(ctx context.Context, err error) error {
	if err != nil && ctx.Err() == nil && (errors.Is(err, sluice.ErrStore) || errors.Is(err, context.DeadlineExceeded)) {
		t.m.storeErrors.Inc()
		if !errors.Is(err, sluice.ErrStore) {
			err = fmt.Errorf("%w: no answer within %v: %w", sluice.ErrStore, t.d, err)
		}
	}
	return err
}
