package rules

import (
	"fmt"
	"log/slog"
	"sort"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
)

// DefaultMaxDescriptors is the default bound on the descriptors of one
// request: Envoy sends a handful, a batch of checks a few dozen.
const DefaultMaxDescriptors = 256

// maxNamespace bounds Config.Namespace, as sluice.Config.Namespace is.
const maxNamespace = 128

// ErrUnknownDomain means a request names no domain or rule of the
// configuration. It wraps sluice.ErrInvalidRequest. Envoy's service
// answers such requests OK with no limits; the HTTP API refuses them.
var ErrUnknownDomain = fmt.Errorf("%w: unknown domain", sluice.ErrInvalidRequest)

// ErrTooManyDescriptors means a request has more descriptors than the
// engine's bound. It wraps sluice.ErrInvalidRequest.
var ErrTooManyDescriptors = fmt.Errorf("%w: too many descriptors", sluice.ErrInvalidRequest)

// Config configures an Engine. The zero value of each field but Store
// means its default.
type Config struct {
	// Store keeps the state of every rule. Required.
	Store sluice.Store
	// StoreFor returns the store of a rule, already wrapped as the rule
	// wants it (sluice serve wraps each named rule's and each domain's
	// store with its failure policy and its metrics), once, when New
	// builds the rule. Rules of one domain must get one store, so that
	// their descriptors are decided in one batch. Default nil (and a nil
	// answer): Store.
	StoreFor func(rule *Rule) sluice.Store
	// Rules are the named rules, as config.Parse returns them.
	Rules []config.NamedRule
	// Domains are the descriptor trees, as config.Parse returns them.
	// At least one rule or domain; names unique among both.
	Domains []config.Domain
	// Namespace prefixes every key the engine stores, to share a store
	// with other applications. Default "sluice".
	Namespace string
	// Clock returns the time of each request. Default nil: the store's
	// own clock.
	Clock func() time.Time
	// MaxDescriptors bounds the descriptors of one request. Default
	// DefaultMaxDescriptors.
	MaxDescriptors int
	// Logger receives failed refunds. Default slog.Default().
	Logger *slog.Logger
	// Guard, when set, judges the actor of each descriptor of a named
	// rule before its limits, and counts the takes they deny as
	// failures in the jails of the rule (see the package documentation).
	// Default nil: the limits alone decide.
	Guard *guard.Guard
	// OnGuard, when set, is told of each verdict of the Guard other than
	// Pass, with the rule it was about and the descriptor's key as the
	// rule's store would have counted it (a key longer than
	// sluice.MaxActorLen as its digest): for metrics and the dashboard.
	// It must be fast. Default nil.
	OnGuard func(rule *Rule, key string, v guard.Verdict)
	// Tracer, when set, traces each Check in a span "sluice.check" (the
	// store calls under it join it through the context). Default nil:
	// no spans, at the cost of one nil check.
	Tracer trace.Tracer
}

// An Engine decides requests against the rules of a configuration: for
// each descriptor of a request it finds the rule that applies and asks
// the store, then combines the answers as Envoy's rate limit service
// does. Every API of sluice serve (Envoy's gRPC, the HTTP JSON API,
// forward-auth) asks one Engine, so they all decide alike.
//
// Create Engines with New; the zero value is not usable. An Engine is
// immutable and safe for concurrent use; a configuration reload builds a
// new one, and the states (kept in the store, keyed by domain, entries and
// limit) carry over to it.
type Engine struct {
	domains  map[string]*domain
	few      []*domain // the domains, when there are at most scanDomains of them (see domain)
	rules    map[string]*Rule
	ids      []string
	storeFor func(*Rule) sluice.Store
	clock    func() time.Time
	max      int
	log      *slog.Logger
	guard    *guard.Guard
	onGuard  func(*Rule, string, guard.Verdict)
	tracer   trace.Tracer // nil: no spans
	ns       string       // the namespace: outcome markers live under it
	// overrides are the rules of each domain's limit overrides.
	overrides map[*domain]*overrides
}

// New builds an Engine for c, validating every rule now.
func New(c Config) (*Engine, error) {
	if c.Store == nil {
		return nil, fmt.Errorf("rules: %w: nil store", sluice.ErrInvalidRequest)
	}
	if len(c.Rules)+len(c.Domains) == 0 {
		return nil, fmt.Errorf("rules: %w: no rules", sluice.ErrInvalidRequest)
	}
	ns := c.Namespace
	if ns == "" {
		ns = "sluice"
	}
	if len(ns) > maxNamespace {
		return nil, fmt.Errorf("rules: %w: namespace of %d bytes, at most %d", sluice.ErrInvalidRequest, len(ns), maxNamespace)
	}
	e := &Engine{
		domains: make(map[string]*domain, len(c.Rules)+len(c.Domains)),
		rules:   make(map[string]*Rule),
		clock:   c.Clock,
		max:     c.MaxDescriptors,
		log:     c.Logger,
		guard:   c.Guard,
		onGuard: c.OnGuard,
		tracer:  c.Tracer,
		ns:      ns,
	}
	e.storeFor = func(ru *Rule) sluice.Store {
		if c.StoreFor != nil {
			if s := c.StoreFor(ru); s != nil {
				return s
			}
		}
		return c.Store
	}
	if e.max <= 0 {
		e.max = DefaultMaxDescriptors
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	if err := e.addNamed(c.Rules, ns); err != nil {
		return nil, err
	}
	if err := e.addDomains(c.Domains, ns); err != nil {
		return nil, err
	}
	e.wire()
	return e, nil
}

// wire lists the rules by ID, and gives each rule, and each domain's
// limit overrides, its store.
func (e *Engine) wire() {
	for id := range e.rules {
		e.ids = append(e.ids, id)
	}
	sort.Strings(e.ids)
	for _, ru := range e.rules {
		ru.store = e.storeFor(ru)
		if b, ok := ru.store.(sluice.Binder); ok && len(ru.Limits) > 0 {
			ru.bound, _ = b.Bind(ru.store, ru.prefix, ru.Limits) // nil for a store that wraps a Binder
		}
	}
	e.overrides = make(map[*domain]*overrides, len(e.domains))
	for _, d := range e.domains {
		e.overrides[d] = e.newOverrides(d)
		if len(e.domains) <= scanDomains {
			e.few = append(e.few, d)
		}
	}
}

// scanDomains is how many domains an engine finds by comparing their
// names in turn; beyond, by its map. A map hashes a short name before
// comparing it: of a replay of the sample's three rules, 2.4% of the CPU
// went to finding each check's rule by name.
const scanDomains = 8

// domain returns the domain or named rule called name, or nil.
func (e *Engine) domain(name string) *domain {
	if e.few == nil {
		return e.domains[name]
	}
	for _, d := range e.few {
		if d.name == name {
			return d
		}
	}
	return nil
}

// Rules returns every rule of the engine, sorted by ID.
func (e *Engine) Rules() []*Rule {
	out := make([]*Rule, len(e.ids))
	for i, id := range e.ids {
		out[i] = e.rules[id]
	}
	return out
}

// Rule returns the rule with the given ID (a named rule's name, or a
// descriptor node's full key), or nil.
func (e *Engine) Rule(id string) *Rule { return e.rules[id] }

// IsNamed reports whether name is a named rule (not a domain).
func (e *Engine) IsNamed(name string) bool {
	d := e.domain(name)
	return d != nil && d.named != nil
}

// Names returns the names of the domains and named rules, sorted.
func (e *Engine) Names() []string {
	out := make([]string, 0, len(e.domains))
	for n := range e.domains {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// addNamed adds the named rules rs, keyed under namespace ns.
func (e *Engine) addNamed(rs []config.NamedRule, ns string) error {
	for _, r := range rs {
		if e.domains[r.Name] != nil {
			return fmt.Errorf("rules: %w: %q defined twice", sluice.ErrInvalidRequest, r.Name)
		}
		// The prefix of sluice.Limiter with Action r.Name: a named
		// rule shares its states with Limiters of the same namespace.
		ru := newRule(r.Name, r.Name, "", ns+":"+r.Name+":", config.RateLimit{Limits: r.Limits}, r.Shadow, false)
		if err := (&sluice.Request{Limits: r.Limits, Op: sluice.OpReset}).Validate(); err != nil {
			return fmt.Errorf("rules: rule %q: %w", r.Name, err)
		}
		e.domains[r.Name] = &domain{name: r.Name, named: ru}
		e.rules[ru.ID] = ru
	}
	return nil
}

// addDomains adds the descriptor domains ds, keyed under namespace ns.
func (e *Engine) addDomains(ds []config.Domain, ns string) error {
	for _, cd := range ds {
		if e.domains[cd.Name] != nil {
			return fmt.Errorf("rules: %w: %q defined twice", sluice.ErrInvalidRequest, cd.Name)
		}
		// '@' starts no rule name, so no named rule's keys can collide
		// with a domain's.
		d := &domain{name: cd.Name, prefix: ns + ":@" + string(appendEscaped(nil, cd.Name, newEscaper(":"))) + ":"}
		found := make(map[string]*Rule)
		d.build(&d.root, cd.Name, cd.Descriptors, found)
		for id, ru := range found {
			if e.rules[id] != nil {
				return fmt.Errorf("rules: %w: rule %q defined twice", sluice.ErrInvalidRequest, id)
			}
			if !ru.Unlimited && !ru.Deny {
				if err := (&sluice.Request{Limits: ru.Limits, Op: sluice.OpReset}).Validate(); err != nil {
					return fmt.Errorf("rules: %s: %w", id, err)
				}
			}
			e.rules[id] = ru
		}
		e.domains[cd.Name] = d
	}
	return nil
}
