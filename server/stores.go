package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
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

// stores is the store of a Service, in layers: the primary (memory, Redis
// or memcached), under it for shared stores a failure policy chosen per
// rule, and over everything a meter that counts decisions by rule.
type stores struct {
	// primary is the store as configured, without policy: readiness
	// probes ask it directly.
	primary sluice.Store
	// top is what the rules' limiters use.
	top *meter
	// policies maps a limiter prefix to the failure policy of its rule,
	// swapped whole on reload; nil for the memory store.
	policies *atomic.Pointer[policyTable]
	// registry keeps the bans of every process sharing a Redis or
	// memcached store (packages guard/redisbans, guard/memcachedbans);
	// nil for the memory store.
	registry guard.Registry
	closers  []io.Closer
}

// policyTable gives the failure policy of each rule, by the prefix of its
// limiter's keys ("sluice:login:"), and the default for any other prefix.
type policyTable struct {
	byPrefix map[string]string
	def      string
}

func (t *policyTable) of(prefix string) string {
	if p, ok := t.byPrefix[prefix]; ok {
		return p
	}
	return t.def
}

// newPolicyTable returns the policies of c's rules and domains, for
// states whose keys start with namespace.
func newPolicyTable(c *config.Config, namespace string) *policyTable {
	t := &policyTable{byPrefix: make(map[string]string, len(c.Failure.Rules)), def: c.Failure.Policy}
	for name, p := range c.Failure.Rules {
		for _, prefix := range prefixes(c, namespace, name) {
			t.byPrefix[prefix] = p
		}
	}
	return t
}

// prefixes returns the Request.Prefix of the states of a named rule (as
// sluice.New builds it from the namespace and the action) or of a domain
// (as package server/rules builds it: '@' and the name with ':' and '%'
// percent-escaped). The metrics tests check that both agree with what
// the engine sends.
func prefixes(c *config.Config, namespace, name string) []string {
	var out []string
	if _, ok := c.Rule(name); ok {
		out = append(out, namespace+":"+name+":")
	}
	for _, d := range c.Domains {
		if d.Name == name {
			var b strings.Builder
			for i := 0; i < len(name); i++ {
				if ch := name[i]; ch == ':' || ch == '%' {
					fmt.Fprintf(&b, "%%%02X", ch)
				} else {
					b.WriteByte(ch)
				}
			}
			out = append(out, namespace+":@"+b.String()+":")
		}
	}
	return out
}

// openStores opens the store c names and puts it under the failure
// policies of c.
func openStores(ctx context.Context, c *config.Config, namespace string, m *metrics, log *slog.Logger) (*stores, error) {
	st := &stores{}
	var wrap func(addr string, s sluice.Store) sluice.Store
	if c.Store.Shared() {
		st.policies = new(atomic.Pointer[policyTable])
		st.policies.Store(newPolicyTable(c, namespace))
		wrap = func(addr string, s sluice.Store) sluice.Store {
			r, err := newRouter(s, addr, namespace, c.Failure, st.policies, m, log)
			if err != nil { // only for a nil store, which cannot happen
				return s
			}
			st.closers = append(st.closers, r)
			return r
		}
	}
	switch c.Store.Type {
	case config.StoreMemory:
		ms := memory.New(memory.Config{MaxBytes: c.Store.Memory.MaxBytes})
		st.primary = ms
		st.closers = append(st.closers, ms)
		st.top = newMeter(ms, m)
	case config.StoreRedis:
		rc := c.Store.Redis
		opt := rueidis.ClientOption{
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
				TopologyRefreshInterval: 5 * time.Second,
			}
		}
		client, err := rueidis.NewClient(opt)
		if err != nil {
			return nil, fmt.Errorf("store: redis %v: %w: %w", opt.InitAddress, sluice.ErrStore, err)
		}
		rs, err := redis.New(redis.Config{Client: client, InFlight: rc.InFlight})
		if err != nil {
			client.Close()
			return nil, fmt.Errorf("store: %w", err)
		}
		st.closers = append(st.closers, closerFunc(func() error { client.Close(); return nil }))
		// The bans live beside the state, on the same client, so that
		// every process enforces, lists and may lift the fleet's bans.
		bans, err := redisbans.New(ctx, redisbans.Config{Client: client, Prefix: namespace + ":bans"})
		if err != nil {
			return nil, errors.Join(err, st.close())
		}
		st.registry = bans
		st.closers = append(st.closers, bans) // closed before the client
		st.primary = rs
		st.top = newMeter(wrap("redis", rs), m)
	case config.StoreMemcached:
		mc := c.Store.Memcached
		// Each server gets its own policies and breaker: a dead server
		// degrades only the actors placed on it.
		ms, err := memcached.New(memcached.Config{Addrs: mc.Addrs, Weights: mc.Weights, WrapServer: wrap})
		if err != nil {
			return nil, fmt.Errorf("store: memcached: %w", err)
		}
		st.closers = append(st.closers, ms)
		bans, err := memcachedbans.New(ctx, memcachedbans.Config{Addrs: mc.Addrs, Prefix: namespace + ":bans"})
		if err != nil {
			return nil, errors.Join(err, st.close())
		}
		st.registry = bans
		st.closers = append(st.closers, bans)
		st.primary = ms
		st.top = newMeter(ms, m)
	default:
		return nil, fmt.Errorf("store: %w: unknown store type %q", sluice.ErrInvalidRequest, c.Store.Type)
	}
	_ = ctx
	return st, nil
}

// close closes what openStores opened, policies first.
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

// A router applies to each request the failure policy of its rule over
// one shared store (or one server of a fleet): open and local through a
// store/fallback Store each, closed as the store itself under a timeout,
// whose errors the API answers with 503.
//
// The states of jails (failures, offences, bans) bypass the policies:
// store/fallback's deny cache would keep refusing a banned actor that
// another process lifted, for as long as the ban was to last. A store
// failure while checking a ban is logged and lets the request on to the
// rule, which has its own policy.
type router struct {
	open, local *fallback.Store
	closed      *timeoutStore
	table       *atomic.Pointer[policyTable]
	jails       string // the prefix of the jails' states
}

func newRouter(s sluice.Store, addr, namespace string, f config.Failure, table *atomic.Pointer[policyTable], m *metrics, log *slog.Logger) (*router, error) {
	mk := func(p fallback.Policy) (*fallback.Store, error) {
		return fallback.New(fallback.Config{
			Primary:   s,
			Policy:    p,
			Timeout:   f.Timeout,
			Instances: f.Instances,
			OnError:   func(err error) { m.storeErrors.Inc() },
			OnBreaker: func(open bool) {
				m.breaker(addr, p.String(), open)
				if open {
					log.Warn("store failing: answering by failure policy", "store", addr, "policy", p.String())
				} else {
					log.Info("store answers again", "store", addr, "policy", p.String())
				}
			},
		})
	}
	open, err := mk(fallback.Open)
	if err != nil {
		return nil, err
	}
	local, err := mk(fallback.Local)
	if err != nil {
		return nil, err
	}
	m.watchFallback(addr, fallback.Open.String(), open)
	m.watchFallback(addr, fallback.Local.String(), local)
	return &router{open: open, local: local, closed: &timeoutStore{s, f.Timeout, m}, table: table, jails: namespace + ":jail-"}, nil
}

// Decide decides r under the failure policy of its rule.
func (r *router) Decide(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	return r.route(req.Prefix).Decide(ctx, req)
}

// policyStore is a store of a router: a policy over the shared store.
type policyStore interface {
	sluice.Store
	batcher
}

// route returns the store of the failure policy of the rule whose states
// start with prefix.
func (r *router) route(prefix string) policyStore {
	if strings.HasPrefix(prefix, r.jails) {
		return r.closed
	}
	switch r.table.Load().of(prefix) {
	case config.FailOpen:
		return r.open
	case config.FailClosed:
		return r.closed
	}
	return r.local
}

// DecideBatch decides rs under the failure policy of each one's rule: in
// one call of the policy's store when they share a policy (the
// descriptors of one domain always do), else in one call per policy.
func (r *router) DecideBatch(ctx context.Context, rs []sluice.Request) ([]sluice.Decision, []error) {
	if len(rs) == 0 {
		return nil, nil
	}
	first := r.route(rs[0].Prefix)
	same := true
	for i := range rs[1:] {
		if r.route(rs[i+1].Prefix) != first {
			same = false
			break
		}
	}
	if same {
		return first.DecideBatch(ctx, rs)
	}
	ds, errs := make([]sluice.Decision, len(rs)), make([]error, len(rs))
	groups := map[policyStore][]int{}
	var order []policyStore
	for i := range rs {
		p := r.route(rs[i].Prefix)
		if groups[p] == nil {
			order = append(order, p)
		}
		groups[p] = append(groups[p], i)
	}
	for _, p := range order {
		idx := groups[p]
		sub := make([]sluice.Request, len(idx))
		for k, i := range idx {
			sub[k] = rs[i]
		}
		got, gerrs := p.DecideBatch(ctx, sub)
		for k, i := range idx {
			ds[i], errs[i] = got[k], gerrs[k]
		}
	}
	return ds, errs
}

var (
	_ policyStore = (*fallback.Store)(nil)
	_ policyStore = (*timeoutStore)(nil)
	_ batcher     = (*router)(nil)
	_ batcher     = (*meter)(nil)
)

// Close stops the fallbacks' replays; it does not close the store.
func (r *router) Close() error { return errors.Join(r.open.Close(), r.local.Close()) }

// timeoutStore bounds each call of a store, for the fail-closed policy.
type timeoutStore struct {
	s sluice.Store
	d time.Duration
	m *metrics
}

func (t *timeoutStore) Decide(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
	cctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	d, err := t.s.Decide(cctx, r)
	return d, t.failure(ctx, err)
}

// DecideBatch decides rs in one call of the store when it can batch,
// under one timeout, else one Decide each.
func (t *timeoutStore) DecideBatch(ctx context.Context, rs []sluice.Request) ([]sluice.Decision, []error) {
	b, ok := t.s.(batcher)
	if !ok {
		return decideEach(ctx, t, rs)
	}
	cctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	ds, errs := b.DecideBatch(cctx, rs)
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
