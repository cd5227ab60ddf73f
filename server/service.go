package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/jsonhttp"
	"github.com/sluicehq/sluice/internal/logthrottle"
	"github.com/sluicehq/sluice/server/admin"
	"github.com/sluicehq/sluice/server/bannotify"
	"github.com/sluicehq/sluice/server/envoyrls"
	"github.com/sluicehq/sluice/server/forwardauth"
	"github.com/sluicehq/sluice/server/grpcapi"
	"github.com/sluicehq/sluice/server/httpapi"
	"github.com/sluicehq/sluice/server/leaseapi"
	"github.com/sluicehq/sluice/server/rlqs"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/store/memory"
)

// Options configure a Service beyond its configuration file. The zero
// value of each field means its default.
type Options struct {
	// Logger receives the service's logs, at most a few lines a second
	// per message and rule (see package internal/logthrottle), however
	// many requests fail or are refused. Default slog.Default().
	Logger *slog.Logger
	// Namespace prefixes every key the service stores. Default "sluice".
	Namespace string
	// Clock returns the time of each request. Default nil: the store's
	// own clock (for Redis, the server's).
	Clock func() time.Time
	// EnvoyHeaders adds the IETF RateLimit fields to the answers of
	// Envoy's API, gRPC and /json (envoyrls.Config.ResponseHeaders).
	// Default false.
	EnvoyHeaders bool
	// Store, when set, is the store to decide on instead of the one the
	// configuration names (for embedding the service, and for tests);
	// the Service does not close it. Default nil.
	Store sluice.Store
	// TracerProvider, when set, receives the service's spans instead of
	// the OTLP exporter of the configuration's telemetry section (for
	// embedding the service, and for tests). Default nil.
	TracerProvider trace.TracerProvider
	// OnBan, when set, is told of each ban a jail makes, after the
	// service has counted and logged it (sluice simulate counts the bans
	// a replay would make). It must be fast. Default nil.
	OnBan func(guard.Ban)
	// IgnoreStateFile starts without reading guard.state_file, which the
	// first write then replaces: for a file that is corrupt or of another
	// version (sluice serve -ignore-state-file). Default false: read it.
	IgnoreStateFile bool
	// Unmetered decides each rule on its store directly, neither counting
	// nor timing the store's decisions in the rules' metrics (two clock
	// reads and a histogram a decision): for sluice simulate, which
	// tallies every decision itself. The guard's verdicts are still
	// counted. Default false.
	Unmetered bool
}

// A Service is sluice serve without its listeners: the store a
// configuration names under its failure policies, the APIs (HTTP JSON,
// forward-auth, Envoy's gRPC and /json), the guard, Prometheus metrics,
// the admin API, and reloads that swap the rules while keeping the store
// and so the counters.
//
// Create Services with NewService and Close them when done; the zero
// value is not usable. A Service is safe for concurrent use: requests in
// flight during a reload finish on the configuration they started on.
type Service struct {
	opts      Options
	log       *slog.Logger
	m         *metrics
	st        *stores
	denials   denialLog
	state     atomic.Pointer[state]
	reload    sync.Mutex // serializes reloads and list edits
	edits     listEdits  // the admin API's list edits, replayed by build
	stateFile *stateFile // nil without guard.state_file
	rls       *envoyrls.Service
	limits    *grpcapi.Service
	leases    *leaseapi.GRPC
	leaseM    *leaseapi.Metrics
	quota     *rlqs.Service // Envoy's RLQS and POST /v1/quota
	quotaM    *rlqs.Metrics
	handler   http.Handler
	tel       *telemetry
	notes     *bannotify.Notifier // the audit trail, the sinks and the expiry watcher
	live      *live               // the dashboard's rates and top keys; nil when the admin API is off
	admin     *adminBackend       // what the admin API manages
}

// state is what a configuration builds and a reload replaces whole.
type state struct {
	cfg      *config.Config
	engine   *rules.Engine
	guard    *guard.Guard // asked first by every door: rate checks, logins, leases
	api      *httpapi.Handler
	auth     *forwardauth.Handler
	jails    map[string]*guard.Jail // by name, ManualJail included
	allow    *guard.List
	deny     *guard.List
	policies map[string]sluice.FailurePolicy // by named rule and domain
	logins   map[string]*guard.Login
	admin    http.Handler     // nil when the admin API is off
	sinks    *bannotify.Sinks // where bans are told
	leases   *leaseapi.Leases // the concurrency rules
}

// ManualJail is the jail of bans made by hand through the admin API; it
// exists in every configuration, and its bans are enforced like those of
// the configured jails.
const ManualJail = "manual"

// NewService opens the store c names and builds the service on it.
func NewService(ctx context.Context, c *config.Config, o Options) (*Service, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Namespace == "" {
		o.Namespace = "sluice"
	}
	s := &Service{opts: o, log: slog.New(logthrottle.New(o.Logger.Handler(), logthrottle.Config{})), m: newMetrics()}
	s.denials.max = 100
	s.leaseM = leaseapi.NewMetrics(s.m.reg)
	s.quotaM = rlqs.NewMetrics(s.m.reg)
	st, err := openStores(ctx, c, o, s.m, s.log)
	if err != nil {
		return nil, err
	}
	s.st = st
	if err := s.openState(ctx, c.Guard.StateFile); err != nil {
		return nil, errors.Join(err, st.close())
	}
	s.m.watchBans(st.registry.Bans())
	s.notes = bannotify.New(bannotify.Config{Registry: st.registry, Registerer: s.m.reg, Logger: s.log, Clock: s.now})
	s.admin = &adminBackend{state: s.state.Load, stores: st, clock: s.now, m: s.m, denials: &s.denials, notes: s.notes, reload: &s.reload, edits: &s.edits}
	if c.Admin.Enabled() {
		s.live = newLive(s.m, s.state.Load, st.registry.Bans(), s.now, s.log)
		s.live.quota = s.quotaM.Stats
		s.admin.live = s.live
	}
	if s.tel, err = newTelemetry(ctx, c.Telemetry, o, s.m.reg, s.log); err != nil {
		return nil, errors.Join(err, st.close())
	}
	next, err := s.build(c)
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	st.registry.Bans().Spare(next.allow)
	s.state.Store(next)
	s.notes.Use(next.sinks)
	s.m.watchIPv6(func() httplimit.AdaptiveStats { return s.state.Load().auth.IPv6Stats() })
	if s.live != nil {
		s.live.start()
	}
	if s.stateFile != nil {
		s.stateFile.start()
	}
	s.m.lastReload.SetToCurrentTime()
	if s.rls, err = envoyrls.New(envoyrls.Config{Engine: s.Engine, ResponseHeaders: o.EnvoyHeaders, Logger: s.log}); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	s.limits = grpcapi.New(s.Engine, func() map[string]*guard.Login { return s.state.Load().logins }, s.log)
	s.leases = leaseapi.NewGRPC(s.Leases)
	if s.quota, err = s.newQuota(); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	s.handler = s.tel.traceContext(s.routes())
	return s, nil
}

// routes returns the service's HTTP handler.
func (s *Service) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", s.m.instrument("metrics", promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{})))
	mux.Handle("/v1/auth", s.m.instrument("auth", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.state.Load().auth.ServeHTTP(w, r)
	})))
	mux.Handle("/readyz", s.m.instrument("readyz", http.HandlerFunc(s.readyz)))
	mux.Handle("/healthz", s.m.instrument("healthz", http.HandlerFunc(s.healthz)))
	mux.Handle("/json", s.m.instrument("json", envoyrls.JSONHandler(s.rls)))
	leases := leaseapi.Handler(s.Leases, s.log)
	for _, p := range []string{"/v1/acquire", "/v1/release", "/v1/extend"} {
		mux.Handle(p, s.m.instrument("leases", leases))
	}
	mux.Handle("/v1/quota", s.m.instrument("quota", s.quota.Handler()))
	mux.Handle("/openapi.yaml", s.m.instrument("openapi", httpapi.OpenAPIHandler()))
	mux.Handle("/", s.m.instrument("api", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.state.Load().api.ServeHTTP(w, r)
	})))
	return mux
}

// RateLimitService returns Envoy's rate limit service over the service's
// rules, for a gRPC server (envoyrls.NewServer); /json of Handler answers
// through it too.
func (s *Service) RateLimitService() *envoyrls.Service { return s.rls }

// LimitsService returns the sluice gRPC API (insert and the outcome
// calls) over the service's rules, to register beside Envoy's on a gRPC
// server.
func (s *Service) LimitsService() *grpcapi.Service { return s.limits }

// LeasesService returns the gRPC service of the concurrency rules
// (sluice.v1.Leases), to register beside the others on a gRPC server.
func (s *Service) LeasesService() *leaseapi.GRPC { return s.leases }

// QuotaService returns Envoy's Rate Limit Quota Service over the
// service's rules, to register beside the others on a gRPC server;
// POST /v1/quota of Handler answers through it too.
func (s *Service) QuotaService() *rlqs.Service { return s.quota }

// newQuota builds the quota service over the service's store: the
// primary store divides the limits, and while a shared one fails, the
// memory store of this process (the local leases') those of the rules
// that fail local.
func (s *Service) newQuota() (*rlqs.Service, error) {
	qs, ok := s.st.primary.(sluice.QuotaStore)
	if !ok { // an embedded Options.Store without quotas: divide them in this process
		ms := memory.New(memory.Config{MaxBytes: localLeaseBytes})
		s.st.closers = append(s.st.closers, ms)
		qs = ms
	}
	c := rlqs.Config{
		Config: s.Config, Engine: s.Engine, Guard: func() *guard.Guard { return s.state.Load().guard },
		OnGuard:   func(rule string, a guard.Action) { s.m.guard.WithLabelValues(rule, a.String()).Inc() },
		Store:     qs,
		Namespace: s.opts.Namespace, Metrics: s.quotaM, Logger: s.log,
	}
	if local, ok := s.st.localLeases.(sluice.QuotaStore); ok && s.st.policies != nil {
		c.Shared, c.Local = true, local
	}
	return rlqs.New(c)
}

// Leases returns the concurrency rules of the configuration in force.
func (s *Service) Leases() *leaseapi.Leases { return s.state.Load().leases }

// Engine returns the rules engine of the configuration in force, which
// decides for every API (Envoy's gRPC API asks it at each request, so a
// reload takes effect at once).
func (s *Service) Engine() *rules.Engine { return s.state.Load().engine }

// build makes the state of configuration c over the service's stores:
// the guard, the jails, each rule wired to its store (its failure
// policy's, counted and timed by its metrics), the engine and the APIs.
func (s *Service) build(c *config.Config) (*state, error) {
	n := &state{cfg: c, allow: &guard.List{}, deny: &guard.List{}, policies: map[string]sluice.FailurePolicy{}}
	n.fillLists(c.Guard)
	for _, e := range s.edits {
		_ = n.apply(e) // checked when made
	}
	g, err := s.buildGuard(n, c)
	if err != nil {
		return nil, err
	}
	n.guard = g
	meters := map[string]*meter{}
	for _, name := range scopes(c) {
		n.policies[name] = c.Failure.PolicyOf(name)
		mt := &meter{next: s.st.policy(n.policies[name]), rm: s.m.rule(name), denials: &s.denials, tracer: s.tel.tracer}
		if s.live != nil {
			mt.top = s.live.window(name)
		}
		meters[name] = mt
	}
	n.engine, err = rules.New(rules.Config{
		Store: s.st.policy(c.Failure.Policy),
		StoreFor: func(ru *rules.Rule) sluice.Store {
			if s.opts.Unmetered {
				return meters[scopeOf(ru)].next
			}
			return meters[scopeOf(ru)]
		},
		Rules: c.Rules, Domains: c.Domains,
		Namespace: s.opts.Namespace, Clock: s.opts.Clock, Logger: s.log, Guard: g, Tracer: s.tel.tracer,
		OnGuard: func(ru *rules.Rule, key string, v guard.Verdict) { s.guarded(meters[scopeOf(ru)], key, v) },
	})
	if err != nil {
		return nil, err
	}
	if err := s.buildAPIs(n, c); err != nil {
		return nil, err
	}
	if n.sinks, err = s.notes.Sinks(c); err != nil {
		return nil, err
	}
	return n, nil
}

// buildAPIs builds what the state's APIs decide with beside the engine
// (the concurrency rules, the login rules) and the APIs themselves.
func (s *Service) buildAPIs(n *state, c *config.Config) error {
	ls, _ := s.st.primary.(sluice.LeaseStore) // memory, Redis and memcached are
	lc := leaseapi.Config{Store: ls, Rules: c.Concurrency, Namespace: s.opts.Namespace, Metrics: s.leaseM, Guard: n.guard}
	if s.st.policies != nil { // a shared store, which may fail
		lc.Policy, lc.Timeout, lc.Local = c.Failure.PolicyOf, c.Failure.Timeout, s.st.localLeases
	}
	var err error
	if n.leases, err = leaseapi.New(lc); err != nil {
		return err
	}
	if n.logins, err = s.buildLogins(n, c); err != nil {
		return err
	}
	if n.api, err = httpapi.New(httpapi.Config{Engine: n.engine, Logger: s.log, Logins: n.logins}); err != nil {
		return err
	}
	if n.auth, err = forwardauth.New(c.ForwardAuth, n.engine, authLogins(c, n.logins), s.st.policy(sluice.FailClosed), s.log); err != nil {
		return err
	}
	if c.Admin.Enabled() {
		n.admin, err = admin.Handler(s.admin, admin.Config{Token: c.Admin.Token, ReadOnlyToken: c.Admin.ReadOnlyToken, Clock: s.opts.Clock})
	}
	return err
}

// fillLists adds the allow and deny entries of g to the state's lists.
func (n *state) fillLists(g config.Guard) {
	for _, e := range g.Allow {
		n.allow.Add(e)
	}
	for _, e := range g.Deny {
		n.deny.Add(e)
	}
}

// buildGuard builds the jails of c (and ManualJail) over the jails'
// store, and the guard of the state's lists and jails.
func (s *Service) buildGuard(n *state, c *config.Config) (*guard.Guard, error) {
	store := &meter{next: s.st.jails, rm: s.m.rule(jailsRule), tracer: s.tel.tracer}
	n.jails = map[string]*guard.Jail{}
	var all []*guard.Jail
	for _, jc := range append([]config.Jail{{Name: ManualJail}}, c.Guard.Jails...) {
		j, err := guard.NewJail(store, guard.JailConfig{
			Name: jc.Name, MaxFailures: jc.MaxFailures, FindTime: jc.FindTime, BanTime: jc.BanTime,
			MaxBanTime: jc.MaxBanTime, Growth: jc.Growth, Jitter: jc.Jitter, Registry: s.st.registry, Namespace: s.opts.Namespace,
			Clock: s.opts.Clock, OnBan: s.onBan, OnLift: s.notes.Lift, OnLost: s.m.strikeLost,
		})
		if err != nil {
			return nil, fmt.Errorf("jail %q: %w", jc.Name, err)
		}
		n.jails[jc.Name] = j
		all = append(all, j)
	}
	strikes := map[string][]*guard.Jail{}
	for _, jc := range c.Guard.Jails {
		for _, r := range jc.Rules {
			strikes[r] = append(strikes[r], n.jails[jc.Name])
		}
	}
	return guard.NewGuard(guard.GuardConfig{Allow: n.allow, Deny: n.deny, Jails: all, Strikes: strikes,
		IPv6Prefix: c.ForwardAuth.IPv6Prefix, Clock: s.opts.Clock}), nil
}

// scopes returns the names that failure policies and metrics tell apart:
// the named rules and the domains.
func scopes(c *config.Config) []string {
	names := make([]string, 0, len(c.Rules)+len(c.Domains))
	for _, r := range c.Rules {
		names = append(names, r.Name)
	}
	for _, d := range c.Domains {
		names = append(names, d.Name)
	}
	return names
}

// scopeOf returns the scope of an engine's rule: its domain, or its own
// name for a named rule.
func scopeOf(ru *rules.Rule) string { return cmp.Or(ru.Domain, ru.ID) }

// guarded counts what the guard decided about key under the rule of
// mt: in sluice_guard_total; a refusal among the rule's most refused
// keys, and, by a ban, in the ban's own count.
func (s *Service) guarded(mt *meter, key string, v guard.Verdict) {
	if c := mt.rm.guard[v.Action]; c != nil {
		c.Inc()
	}
	if v.Action == guard.Exempt {
		return
	}
	if v.Action == guard.Banned {
		s.st.registry.Bans().CountRefusals(v.Ban.Jail, v.Ban.Key, 1)
	}
	if mt.top != nil {
		mt.top.Add(s.now(), key)
	}
}

func (s *Service) onBan(b guard.Ban) {
	s.m.bans.WithLabelValues(b.Jail).Inc()
	s.notes.Ban(b) // logs it too
	if s.opts.OnBan != nil {
		s.opts.OnBan(b)
	}
}

// Handler returns the service's HTTP handler: the HTTP JSON API (package
// server/httpapi), GET /v1/auth (package server/forwardauth), POST /json
// (package server/envoyrls), POST /v1/quota (package server/rlqs), GET
// /metrics, /healthz, /readyz and /openapi.yaml (the HTTP API's
// description, httpapi.OpenAPI).
func (s *Service) Handler() http.Handler { return s.handler }

// ForwardAuth returns the forward-auth endpoint of the configuration in
// force (GET /v1/auth of Handler), whose Check decides a request as the
// endpoint would without answering it.
func (s *Service) ForwardAuth() *forwardauth.Handler { return s.state.Load().auth }

// Config returns the configuration in force.
func (s *Service) Config() *config.Config { return s.state.Load().cfg }

// Reload replaces the configuration with c, keeping the store and so the
// counters of every rule that is kept. A configuration that changes what
// a reload cannot (the store, the failure timeout and instances, the
// listeners, the ban registry's capacity) or that cannot be built is
// rejected: the error says why, the old configuration keeps serving, and
// it is counted as a failed reload.
func (s *Service) Reload(c *config.Config) error {
	s.reload.Lock()
	defer s.reload.Unlock()
	err := s.swap(c)
	if err != nil {
		s.m.reloads.WithLabelValues("failure").Inc()
		return err
	}
	s.m.reloads.WithLabelValues("success").Inc()
	s.m.lastReload.SetToCurrentTime()
	return nil
}

func (s *Service) swap(c *config.Config) error {
	old := s.state.Load().cfg
	switch {
	case !reflect.DeepEqual(old.Store, c.Store):
		return errors.New("the store section changed: restart to apply it")
	case old.Failure.Timeout != c.Failure.Timeout || old.Failure.Instances != c.Failure.Instances:
		return errors.New("failure.timeout or failure.instances changed: restart to apply them")
	case old.Listen != c.Listen || !reflect.DeepEqual(old.TLS, c.TLS):
		return errors.New("listen or tls changed: restart to apply it (a certificate's files are read again when they change)")
	case !reflect.DeepEqual(old.GRPC, c.GRPC):
		return errors.New("the grpc section changed: restart to apply it")
	case old.Admin.Listen != c.Admin.Listen || old.Admin.Enabled() != c.Admin.Enabled() || !reflect.DeepEqual(old.Admin.TLS, c.Admin.TLS):
		return errors.New("the admin listener changed: restart to apply it")
	case banLimits(old.Guard) != banLimits(c.Guard):
		return errors.New("guard.max_bans, max_key_bans, coarsen_ipv4 or coarsen_ipv6 changed: restart to apply it")
	case old.Telemetry != c.Telemetry:
		return errors.New("the telemetry section changed: restart to apply it")
	}
	next, err := s.build(c)
	if err != nil {
		return err
	}
	s.st.registry.Bans().Spare(next.allow)
	s.state.Store(next)
	s.notes.Use(next.sinks)
	if s.live != nil {
		s.live.use(next)
	}
	return nil
}

// now returns the time of the service's clock (Options.Clock).
func (s *Service) now() time.Time {
	if s.opts.Clock != nil {
		return s.opts.Clock()
	}
	return time.Now()
}

// healthz answers 200 while the process serves.
func (s *Service) healthz(w http.ResponseWriter, r *http.Request) {
	if probe(w, r) {
		jsonhttp.Write(w, http.StatusOK, map[string]string{"status": "ok"})
	}
}

// readyz answers 200 when the store answers a peek within two seconds.
func (s *Service) readyz(w http.ResponseWriter, r *http.Request) {
	if !probe(w, r) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.st.ping(ctx); err != nil {
		s.log.WarnContext(r.Context(), "store not ready", "err", err)
		jsonhttp.Error(w, http.StatusServiceUnavailable, "store not ready")
		return
	}
	jsonhttp.Write(w, http.StatusOK, map[string]string{"status": "ready"})
}

// probe answers 405 and reports false for a method other than GET and
// HEAD.
func probe(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	jsonhttp.Error(w, http.StatusMethodNotAllowed, r.Method+" not allowed: use GET")
	return false
}

// Close ends the dashboards' streams, sends what telemetry still holds
// (for up to 5 s), then closes the store. Requests still being served may
// fail.
func (s *Service) Close() error {
	if s.live != nil {
		s.live.close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // flush what telemetry holds
	defer cancel()
	if s.notes != nil {
		s.notes.Close(ctx)
	}
	if s.stateFile != nil {
		s.stateFile.close(ctx)
	}
	return errors.Join(s.tel.close(ctx), s.st.close())
}
