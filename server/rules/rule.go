package rules

import (
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/ratelimitheader"
)

// A Rule is a limit of the configuration as the engine applies it: a named
// rule, or a node of a domain's descriptor tree that has a rate limit.
// Rules are built by New and never modified; share them freely.
type Rule struct {
	// ID identifies the rule, unique in an Engine and stable across
	// reloads of the same configuration: the name of a named rule, or
	// Envoy's full key of a descriptor node ("domain.key_value.key").
	// Metrics are labelled by it: the number of IDs is bounded by the
	// configuration, never by the requests.
	ID string
	// Name is the name given in the configuration (a named rule's name,
	// or Envoy's rate_limit.name), which Replaces refers to; often empty
	// for descriptor nodes.
	Name string
	// Domain is the domain of a descriptor node; empty for a named rule.
	Domain string
	// Limits is the policy applied in the store. Empty for Unlimited;
	// for Deny, one limit of Rate 0 that gives the unit.
	Limits []sluice.Limit
	// Unlimited rules allow every request without asking the store.
	Unlimited bool
	// Deny rules refuse every request without asking the store.
	Deny bool
	// Shadow rules decide and count but never deny.
	Shadow bool
	// Quota rules deny a request only if every quota rule it matches does.
	Quota bool
	// Replaces names the rules this one overrides within a request.
	Replaces []string

	prefix  string       // store prefix of the rule's states
	store   sluice.Store // where they are kept
	bound   sluice.Bound // store's binding of prefix and Limits, if it binds them (see decideOne)
	maxCost int          // the largest cost a request may take: min MaxBurst
	policy  string       // RateLimit-Policy value
	items   map[uint64]string
}

// newRule builds a rule and what it writes in headers. id must be unique.
func newRule(id, name, domain, prefix string, rl config.RateLimit, shadow, quota bool) *Rule {
	r := &Rule{
		ID: id, Name: name, Domain: domain,
		Limits:    rl.Limits,
		Unlimited: rl.Unlimited,
		Deny:      rl.Deny,
		Shadow:    shadow,
		Quota:     quota,
		Replaces:  rl.Replaces,
		prefix:    prefix,
	}
	if len(r.Limits) > 0 && !r.Deny {
		r.maxCost = r.Limits[0].MaxBurst()
		for _, l := range r.Limits[1:] {
			r.maxCost = min(r.maxCost, l.MaxBurst())
		}
	}
	names, policy := ratelimitheader.Policy(fieldName(r.label()), r.Limits)
	r.items = make(map[uint64]string, len(r.Limits))
	for i, l := range r.Limits {
		r.items[l.StateID()] = names[i]
	}
	r.policy = policy
	return r
}

// label is how the rule is named to clients: its Name, else its ID.
func (r *Rule) label() string {
	if r.Name != "" {
		return r.Name
	}
	return r.ID
}

// MaxCost returns the largest cost a single request may take under the
// rule (the smallest MaxBurst of its limits); 0 for Unlimited and Deny
// rules, which take nothing.
func (r *Rule) MaxCost() int { return r.maxCost }

// Policy returns the value of the IETF RateLimit-Policy field for the rule,
// such as `"login-1m";q=5;w=60, "login-1h";q=20;w=3600`; empty for rules
// without limits (Unlimited).
func (r *Rule) Policy() string { return r.policy }

// Fields returns the IETF RateLimit field for decision d of the rule,
// `"login-1m";r=0;t=42`, and Retry-After in whole seconds (rounded up,
// at least 1) when d is a denial, else "".
func (r *Rule) Fields(d sluice.Decision) (rateLimit, retryAfter string) {
	if r.Unlimited {
		return "", ""
	}
	item := r.items[d.Limit.StateID()]
	if item == "" {
		item = fieldName(r.label())
	}
	rateLimit = string(ratelimitheader.AppendItem(make([]byte, 0, 64), item, d))
	if !d.Allowed {
		retryAfter = strconv.FormatInt(max(ratelimitheader.CeilSeconds(d.RetryAfter), 1), 10)
	}
	return rateLimit, retryAfter
}

// The canonical names of the fields SetHeaders sets: h.Set would
// canonicalize "RateLimit-Policy" into a new string on every call.
const (
	policyHeader     = "Ratelimit-Policy"
	rateLimitHeader  = "Ratelimit"
	retryAfterHeader = "Retry-After"
)

// SetHeaders sets RateLimit-Policy, RateLimit and, for a denial,
// Retry-After on h for decision d of the rule. It sets nothing for an
// Unlimited rule.
func (r *Rule) SetHeaders(h http.Header, d sluice.Decision) {
	if r.Unlimited {
		return
	}
	rl, ra := r.Fields(d)
	// As h.Set does, each field's values in a slice of its own (capped:
	// an Add reallocates), the slices cut from one array.
	vs := make([]string, 3)
	vs[0], vs[1], vs[2] = r.policy, rl, ra
	h[policyHeader] = vs[0:1:1]
	h[rateLimitHeader] = vs[1:2:2]
	if ra != "" {
		h[retryAfterHeader] = vs[2:3:3]
	}
}

// fieldName makes s safe inside a structured-field string: printable
// ASCII without '"' or '\'.
func fieldName(s string) string {
	ok := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			b[i] = '_'
		}
	}
	return string(b)
}
