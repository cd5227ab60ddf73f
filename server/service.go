package server

import (
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

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/server/admin"
	"github.com/sluicehq/sluice/server/envoyrls"
	"github.com/sluicehq/sluice/server/rules"
)

// Options configure a Service beyond its configuration file. The zero
// value of each field means its default.
type Options struct {
	// Logger receives the service's logs. Default slog.Default().
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
}

// A Service is sluice serve without its listeners: the store a
// configuration names under its failure policies, the API, forward-auth,
// guard lists and jails, Prometheus metrics, the admin API, and reloads
// that swap the rules while keeping the store and so the counters.
//
// Create Services with NewService and Close them when done; the zero
// value is not usable. A Service is safe for concurrent use: requests in
// flight during a reload finish on the configuration they started on.
type Service struct {
	opts    Options
	log     *slog.Logger
	m       *metrics
	st      *stores
	state   atomic.Pointer[state]
	reload  sync.Mutex // serializes reloads
	reg     guard.Registry
	rls     *envoyrls.Service
	handler http.Handler
}

// state is what a configuration builds and a reload replaces whole.
type state struct {
	cfg   *config.Config
	api   *Server
	auth  *forwardAuth
	jails map[string]*guard.Jail // by name, ManualJail included
	allow *guard.List
	deny  *guard.List
	gate  *gate        // the lists and jails, as every API applies them
	admin http.Handler // nil when the admin API is off
}

// ManualJail is the jail of bans made by hand through the admin API; it
// exists in every configuration, and its bans are enforced like those of
// the configured jails: by forward-auth for every rule, and by the HTTP
// and gRPC APIs for the rules a jail counts.
const ManualJail = "manual"

// NewService opens the store c names and builds the service on it.
func NewService(ctx context.Context, c *config.Config, o Options) (*Service, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Namespace == "" {
		o.Namespace = "sluice"
	}
	s := &Service{opts: o, log: o.Logger, m: newMetrics()}
	st, err := openStores(ctx, c, o.Namespace, s.m, s.log)
	if err != nil {
		return nil, err
	}
	s.st = st
	s.reg = st.registry
	if s.reg == nil {
		s.reg = &guard.MemoryRegistry{}
	}
	next, err := s.build(c)
	if err != nil {
		return nil, errors.Join(err, st.close())
	}
	s.st.top.setRules(c, o.Namespace)
	s.state.Store(next)
	s.m.lastReload.SetToCurrentTime()
	if s.rls, err = envoyrls.New(envoyrls.Config{Engine: s.Engine, ResponseHeaders: o.EnvoyHeaders, Logger: s.log}); err != nil {
		return nil, errors.Join(err, st.close())
	}

	mux := http.NewServeMux()
	mux.Handle("/metrics", s.m.instrument("metrics", promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{})))
	mux.Handle("/v1/auth", s.m.instrument("auth", http.HandlerFunc(s.serveAuth)))
	mux.Handle("/readyz", s.m.instrument("readyz", http.HandlerFunc(s.readyz)))
	mux.Handle("/json", s.m.instrument("json", envoyrls.JSONHandler(s.rls)))
	mux.Handle("/healthz", s.m.instrument("healthz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.state.Load().api.ServeHTTP(w, r)
	})))
	api := s.m.instrument("api", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.state.Load().api.ServeHTTP(w, r)
	}))
	mux.Handle("/", api)
	s.handler = mux
	return s, nil
}

// RateLimitService returns Envoy's rate limit service over the service's
// rules, for a gRPC server (envoyrls.NewServer); /json of Handler answers
// through it too.
func (s *Service) RateLimitService() *envoyrls.Service { return s.rls }

// Engine returns the rules engine of the configuration in force, which
// decides for every API (Envoy's gRPC API asks it at each request, so a
// reload takes effect at once).
func (s *Service) Engine() *rules.Engine { return s.state.Load().api.Engine() }

// build makes the state of configuration c over the service's store.
func (s *Service) build(c *config.Config) (*state, error) {
	n := &state{cfg: c, jails: map[string]*guard.Jail{}, allow: &guard.List{}, deny: &guard.List{}}
	for _, e := range c.Guard.Allow {
		if err := n.allow.Add(e); err != nil {
			return nil, err
		}
	}
	for _, e := range c.Guard.Deny {
		if err := n.deny.Add(e); err != nil {
			return nil, err
		}
	}
	jails := append([]config.Jail{{Name: ManualJail}}, c.Guard.Jails...)
	for _, jc := range jails {
		j, err := guard.NewJail(s.st.top, guard.JailConfig{
			Name: jc.Name, MaxFailures: jc.MaxFailures, FindTime: jc.FindTime, BanTime: jc.BanTime,
			MaxBanTime: jc.MaxBanTime, Growth: jc.Growth, Registry: s.reg, Namespace: s.opts.Namespace,
			Clock: s.opts.Clock, OnBan: s.onBan,
		})
		if err != nil {
			return nil, fmt.Errorf("jail %q: %w", jc.Name, err)
		}
		n.jails[jc.Name] = j
	}
	n.gate = &gate{allow: n.allow, deny: n.deny, jails: n.jails, feeds: map[string][]string{}, log: s.log}
	for _, j := range c.Guard.Jails {
		for _, r := range j.Rules {
			n.gate.feeds[r] = append(n.gate.feeds[r], j.Name)
		}
	}
	api, err := New(Config{Store: s.st.top, Rules: c.Rules, Domains: c.Domains, Namespace: s.opts.Namespace, Clock: s.opts.Clock, Logger: s.log, Guard: n.gate})
	if err != nil {
		return nil, err
	}
	n.api = api
	if n.auth, err = newForwardAuth(c, api, n); err != nil {
		return nil, err
	}
	if c.Admin.Enabled() {
		if n.admin, err = admin.Handler(s, c.Admin.Token); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (s *Service) onBan(b guard.Ban) {
	s.m.bans.WithLabelValues(b.Jail).Inc()
	s.log.Info("banned", "jail", b.Jail, "key", b.Key, "until", b.Until.Format(time.RFC3339), "reason", b.Reason, "offences", b.Offences)
}

// Handler returns the service's HTTP handler: the API of [Server],
// GET /v1/auth (forward-auth), GET /metrics, /healthz and /readyz.
func (s *Service) Handler() http.Handler { return s.handler }

// Config returns the configuration in force.
func (s *Service) Config() *config.Config { return s.state.Load().cfg }

// Reload replaces the configuration with c, keeping the store and so the
// counters of every rule that is kept. A configuration that changes what
// a reload cannot (the store, the failure timeout and instances, the
// listeners) or that cannot be built is rejected: the error says why, the
// old configuration keeps serving, and it is counted as a failed reload.
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
	case old.Listen != c.Listen:
		return errors.New("listen changed: restart to apply it")
	case old.Admin.Listen != c.Admin.Listen || old.Admin.Enabled() != c.Admin.Enabled():
		return errors.New("the admin listener changed: restart to apply it")
	}
	next, err := s.build(c)
	if err != nil {
		return err
	}
	if s.st.policies != nil {
		s.st.policies.Store(newPolicyTable(c, s.opts.Namespace))
	}
	s.st.top.setRules(c, s.opts.Namespace)
	s.state.Store(next)
	return nil
}

// ruleNames returns the names that metrics and failure policies tell
// apart: the named rules and the domains.
func ruleNames(c *config.Config) []string {
	names := make([]string, 0, len(c.Rules)+len(c.Domains))
	for _, r := range c.Rules {
		names = append(names, r.Name)
	}
	for _, d := range c.Domains {
		names = append(names, d.Name)
	}
	return names
}

// readyz answers 200 when the store answers a peek within two seconds.
func (s *Service) readyz(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, r.Method+" not allowed: use GET")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.st.ping(ctx); err != nil {
		s.log.WarnContext(r.Context(), "store not ready", "err", err)
		writeError(w, http.StatusServiceUnavailable, "store not ready")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// Close closes the store. Requests still being served may fail.
func (s *Service) Close() error { return s.st.close() }

var _ sluice.Store = (*meter)(nil)
