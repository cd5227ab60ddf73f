package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/suggest"
	"github.com/sluicehq/sluice/wire"
)

// A Domain is a tree of descriptor rules, as in Envoy's rate limit
// service: a client names the domain and sends descriptors, lists of
// key/value entries such as (remote_address, 203.0.113.7), (path, /login);
// each descriptor is matched against the tree one entry per level, and the
// node it ends on gives its limit.
//
// Matching follows envoyproxy/ratelimit exactly. At each level, an entry
// (k, v) goes to the child with key k and value v if there is one, else to
// the first child with key k whose wildcard value matches v ('*' matches
// any run of bytes), else to the child with key k and no value. A
// descriptor matches only a node at its own depth that has a rate limit;
// otherwise it has no limit (it is allowed and counts nothing).
//
// A node without a value keeps a separate state for each value it sees
// (one counter per address); a wildcard node too, unless ShareThreshold
// makes every value it matches share one state.
type Domain struct {
	// Name identifies the domain in requests: unique in a configuration,
	// and different from the name of every named [Rule].
	Name string
	// Descriptors are the top-level nodes, in file order.
	Descriptors []Descriptor
	// Source is where the domain is defined, "file:line".
	Source string
}

// A Descriptor is a node of a [Domain]'s tree.
type Descriptor struct {
	// Key is the entry key this node matches. Never empty.
	Key string
	// Value is the entry value this node matches: empty for any value
	// (each value its own state), with '*' wildcards for a pattern.
	Value string
	// RateLimit is the limit of descriptors that end on this node; nil
	// for none (such a descriptor is allowed and counts nothing).
	RateLimit *RateLimit
	// Shadow (Envoy's shadow_mode) decides and counts as usual but never
	// denies: the decision is reported as shadowed, the answer is OK.
	Shadow bool
	// Quota (Envoy's quota_mode) makes a denial count against the whole
	// request only when every quota descriptor of the request is denied.
	Quota bool
	// ShareThreshold makes every value matched by a wildcard Value share
	// one state, instead of one per value.
	ShareThreshold bool
	// DetailedMetric and ValueToMetric are Envoy's per-value statistics
	// switches. sluice keeps no per-value metrics (their cardinality is
	// unbounded), so they are read, kept, and have no effect.
	DetailedMetric, ValueToMetric bool
	// Descriptors are the nodes one level deeper, in file order.
	Descriptors []Descriptor
	// Line is the line of the node in its file.
	Line int
}

// RateLimit is what a [Descriptor] node allows.
type RateLimit struct {
	// Name names the limit for Replaces (Envoy's rate_limit.name).
	// Optional.
	Name string
	// Limits is the policy: every limit must allow a request. Empty when
	// Unlimited; for Deny, one limit of Rate 0 that gives Envoy's unit
	// (not a valid sluice.Limit: it never reaches a store). Envoy's unit
	// and requests_per_unit become a fixed window aligned to the Unix
	// epoch, as Envoy counts them.
	Limits []sluice.Limit
	// Unlimited allows every request without asking the store.
	Unlimited bool
	// Deny refuses every request without asking the store (Envoy's
	// requests_per_unit: 0, a block list entry).
	Deny bool
	// Replaces names the limits this one overrides: when a request has
	// descriptors matching both, the replaced ones are not applied.
	Replaces []string
}

// fileDescriptor is the YAML form of a Descriptor: Envoy's fields, and
// sluice's limits (and shadow, the spelling of named rules).
type fileDescriptor struct {
	Key            string           `yaml:"key"`
	Value          string           `yaml:"value"`
	RateLimit      *fileRateLimit   `yaml:"rate_limit"`
	Limits         []string         `yaml:"limits"`
	ShadowMode     bool             `yaml:"shadow_mode"`
	Shadow         bool             `yaml:"shadow"`
	QuotaMode      bool             `yaml:"quota_mode"`
	DetailedMetric bool             `yaml:"detailed_metric"`
	ValueToMetric  bool             `yaml:"value_to_metric"`
	ShareThreshold bool             `yaml:"share_threshold"`
	Metadata       map[string]any   `yaml:"metadata"`
	Descriptors    []fileDescriptor `yaml:"descriptors"`
}

// fileRateLimit is Envoy's rate_limit block, which may hold sluice limits
// instead of unit and requests_per_unit.
type fileRateLimit struct {
	Unit            string `yaml:"unit"`
	RequestsPerUnit uint32 `yaml:"requests_per_unit"`
	Unlimited       bool   `yaml:"unlimited"`
	Name            string `yaml:"name"`
	Replaces        []struct {
		Name string `yaml:"name"`
	} `yaml:"replaces"`
	Limits []string `yaml:"limits"`
}

// maxDomainLen bounds a domain's name, which is part of every state key
// of the domain.
const maxDomainLen = 128

// maxDepth bounds the nesting of descriptors: Envoy sends one entry per
// level, and no real configuration nests deeper than a handful.
const maxDepth = 32

// domain converts the descriptors of the domain name found at path.
func (v *validator) domain(path []any, name string, fds []fileDescriptor) (Domain, error) {
	d := Domain{Name: name, Source: fmt.Sprintf("%s:%d", v.name, v.line(path...))}
	if len(name) > maxDomainLen || strings.ContainsFunc(name, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		return d, v.errorf(at(append(path, "domain")...), "domain %q must be 1 to %d printable ASCII characters without spaces", name, maxDomainLen)
	}
	var err error
	d.Descriptors, err = v.descriptors(at(append(path, "descriptors")...), name, fds, 1)
	return d, err
}

// descriptors converts one level of a descriptor tree; parent is the full
// key of the level ("domain.key_value"), for messages.
func (v *validator) descriptors(path []any, parent string, fds []fileDescriptor, depth int) ([]Descriptor, error) {
	if depth > maxDepth {
		return nil, v.errorf(path, "descriptors nested deeper than %d levels", maxDepth)
	}
	out := make([]Descriptor, 0, len(fds))
	type match struct{ key, value string }
	seen := make(map[match]int, len(fds))
	var errs []error
	for i, fd := range fds {
		p := func(rest ...any) []any { return append(append(append([]any(nil), path...), i), rest...) }
		if fd.Key == "" {
			errs = append(errs, v.errorf(p(), "descriptor has an empty key: give key: NAME"))
			continue
		}
		full := parent + "." + fd.Key
		if fd.Value != "" {
			full += "_" + fd.Value
		}
		if prev, dup := seen[match{fd.Key, fd.Value}]; dup {
			errs = append(errs, v.errorf(p("key"), "duplicate descriptor %q (already at line %d)", full, v.line(append(append([]any(nil), path...), prev)...)))
			continue
		}
		seen[match{fd.Key, fd.Value}] = i
		if fd.ShareThreshold && !strings.Contains(fd.Value, "*") {
			errs = append(errs, v.errorf(p("share_threshold"), "share_threshold needs a wildcard value (containing '*'), but %q has none", full))
			continue
		}
		d := Descriptor{
			Key:            fd.Key,
			Value:          fd.Value,
			Shadow:         fd.ShadowMode || fd.Shadow,
			Quota:          fd.QuotaMode,
			ShareThreshold: fd.ShareThreshold,
			DetailedMetric: fd.DetailedMetric,
			ValueToMetric:  fd.ValueToMetric,
			Line:           v.line(p()...),
		}
		var rlErr, subErr error
		d.RateLimit, rlErr = v.rateLimit(p, full, fd)
		d.Descriptors, subErr = v.descriptors(p("descriptors"), full, fd.Descriptors, depth+1)
		if rlErr != nil || subErr != nil {
			errs = append(errs, rlErr, subErr)
			continue
		}
		out = append(out, d)
	}
	return out, errors.Join(errs...)
}

// rateLimit converts a node's limit: Envoy's rate_limit block, or sluice's
// limits (at the node or in the block).
func (v *validator) rateLimit(p func(...any) []any, full string, fd fileDescriptor) (*RateLimit, error) {
	if fd.RateLimit == nil {
		if len(fd.Limits) == 0 {
			return nil, nil
		}
		ls, err := v.limits(p("limits"), fd.Limits)
		return &RateLimit{Limits: ls}, err
	}
	if len(fd.Limits) > 0 {
		return nil, v.errorf(p("limits"), "descriptor %q has both limits and rate_limit: give one", full)
	}
	frl := fd.RateLimit
	rl := &RateLimit{Name: frl.Name, Unlimited: frl.Unlimited}
	for j, r := range frl.Replaces {
		switch {
		case r.Name == "":
			return nil, v.errorf(p("rate_limit", "replaces", j), "replaces entry has no name")
		case r.Name == frl.Name:
			return nil, v.errorf(p("rate_limit", "replaces", j), "a limit cannot replace itself (%q)", r.Name)
		}
		rl.Replaces = append(rl.Replaces, r.Name)
	}
	unit, known := wire.ParseEnvoyUnit(frl.Unit)
	switch {
	case frl.Unlimited && (frl.Unit != "" || frl.RequestsPerUnit != 0 || len(frl.Limits) > 0):
		return nil, v.errorf(p("rate_limit"), "an unlimited rate_limit takes no unit, requests_per_unit or limits")
	case frl.Unlimited:
		return rl, nil
	case len(frl.Limits) > 0:
		if frl.Unit != "" || frl.RequestsPerUnit != 0 {
			return nil, v.errorf(p("rate_limit", "limits"), "rate_limit has both limits and unit/requests_per_unit: give one")
		}
		var err error
		rl.Limits, err = v.limits(p("rate_limit", "limits"), frl.Limits)
		return rl, err
	case !known:
		return nil, v.errorf(p("rate_limit", "unit"), "invalid rate limit unit %q%s (want second, minute, hour, day, week, month or year)",
			frl.Unit, suggest.DidYouMean(frl.Unit, []string{"second", "minute", "hour", "day", "week", "month", "year"}))
	case frl.RequestsPerUnit == 0:
		rl.Deny = true
		rl.Limits = []sluice.Limit{{Period: unit.Period(), Algorithm: sluice.FixedWindow}}
		return rl, nil
	}
	l := sluice.Limit{Rate: int(frl.RequestsPerUnit), Period: unit.Period(), Algorithm: sluice.FixedWindow}
	if err := l.Validate(); err != nil {
		return nil, v.errorf(p("rate_limit", "requests_per_unit"), "%w", err)
	}
	rl.Limits = []sluice.Limit{l}
	return rl, nil
}

// limits parses a list of limits in sluice.ParseLimit's syntax, and
// checks that a store can apply them together.
func (v *validator) limits(path []any, ss []string) ([]sluice.Limit, error) {
	ls := make([]sluice.Limit, len(ss))
	var errs []error
	for j, s := range ss {
		l, err := sluice.ParseLimit(s)
		if err != nil {
			errs = append(errs, v.errorf(append(append([]any(nil), path...), j), "%w%s", err, limitHint(s)))
		}
		ls[j] = l
	}
	if errs != nil {
		return nil, errors.Join(errs...)
	}
	// The checks a store makes of every request, bar the cost: limits
	// sharing their state cannot be applied together.
	if err := (&sluice.Request{Limits: ls, Op: sluice.OpReset}).Validate(); err != nil {
		return nil, v.errorf(path, "%w", err)
	}
	return ls, nil
}

// limitWords are the words of sluice.ParseLimit's syntax a misspelt
// word of a limit may have meant: its algorithms, options and units.
var limitWords = []string{"gcra", "fixed", "sliding", "approx", "log", "burst", "buckets", "staggered",
	"s", "sec", "second", "seconds", "min", "minute", "minutes", "h", "hour", "hours", "day", "days", "week", "weeks", "ms"}

// limitHint returns `; did you mean "5/min sliding"?` for s, a limit
// sluice.ParseLimit refused, when one of its words, or its period, is a
// misspelling whose correction parses; else "".
func limitHint(s string) string {
	words := strings.Fields(s)
	try := func(i int, head, w string) string {
		fix, ok := suggest.Closest(w, limitWords)
		if !ok {
			return ""
		}
		fixed := slices.Clone(words)
		fixed[i] = head + fix
		if _, err := sluice.ParseLimit(strings.Join(fixed, " ")); err != nil {
			return ""
		}
		return fmt.Sprintf("; did you mean %q?", strings.Join(fixed, " "))
	}
	for i, w := range words {
		if rate, period, ok := strings.Cut(w, "/"); ok && i == 0 {
			if h := try(i, rate+"/", period); h != "" {
				return h
			}
			continue
		}
		if h := try(i, "", w); h != "" {
			return h
		}
	}
	return ""
}

// rules converts the rules section (or an Envoy file's domain) into c's
// named rules and domains.
func (f *file) rules(v *validator, c *Config) error {
	if f.envoy != nil {
		if f.envoy.Domain == "" {
			return v.errorf(at("domain"), "an Envoy rate limit file needs a domain")
		}
		d, err := v.domain(at(), f.envoy.Domain, f.envoy.Descriptors)
		c.Domains = []Domain{d}
		return err
	}
	if len(f.Rules) == 0 {
		if f.inDir {
			return nil // the directory's Envoy files have the rules
		}
		return v.errorf(at("rules"), "no rules: a configuration needs at least one")
	}
	seen := make(map[string]int, len(f.Rules))
	var errs []error
	for i, fr := range f.Rules {
		if err := v.rule(c, seen, i, fr); err != nil {
			errs = append(errs, err)
			if fr.Name != "" { // named for the sections that refer to it
				c.Rules = append(c.Rules, NamedRule{Name: fr.Name})
			}
		}
	}
	if len(errs) == 0 && len(c.Rules)+len(c.Domains) == 0 {
		errs = append(errs, v.errorf(at("rules"), "only concurrency rules: a configuration needs at least one rule with limits (or a domain) too"))
	}
	return errors.Join(errs...)
}

// rule validates the rule of index i, fr, and adds it to c; seen holds
// the index of each name defined so far.
func (v *validator) rule(c *Config, seen map[string]int, i int, fr fileRule) error {
	name, field, kind := fr.Name, "name", "rule"
	if fr.Domain != "" {
		name, field, kind = fr.Domain, "domain", "domain"
	}
	var nameErr error
	switch prev, dup := seen[name]; {
	case fr.Name != "" && fr.Domain != "":
		return v.errorf(at("rules", i), "give a rule a name (with limits) or a domain (with descriptors), not both")
	case name == "":
		nameErr = v.errorf(at("rules", i), "rule has no name: give it name: NAME (or domain: NAME, with descriptors)")
	case !ruleName.MatchString(name):
		nameErr = v.errorf(at("rules", i, field), "%s name %q must be 1 to 64 letters, digits, '_', '-' or '.'", kind, name)
	case dup:
		nameErr = v.errorf(at("rules", i, field), "%s %q is already defined at line %d", kind, name, v.line("rules", prev))
	default:
		seen[name] = i
	}
	var err error
	switch {
	case fr.Domain != "":
		err = v.domainRule(c, i, name, fr)
	case fr.Concurrency != nil:
		err = v.concurrencyRule(c, i, name, fr)
	case len(fr.Descriptors) > 0:
		err = v.errorf(at("rules", i, "descriptors"), "rule %q has descriptors: name a domain instead (domain: %s)", name, name)
	case len(fr.Limits) == 0:
		err = v.errorf(at("rules", i, "limits"), "rule %q has no limits: give limits: [\"5/min\", ...]", name)
	default:
		var ls []sluice.Limit
		if ls, err = v.limits(at("rules", i, "limits"), fr.Limits); err == nil && nameErr == nil {
			c.Rules = append(c.Rules, NamedRule{Name: name, Limits: ls, Shadow: fr.Shadow})
		}
	}
	return errors.Join(nameErr, err)
}

// domainRule validates the rule of index i, fr, a domain named name,
// and adds it to c.
func (v *validator) domainRule(c *Config, i int, name string, fr fileRule) error {
	if len(fr.Limits) > 0 || fr.Shadow {
		return v.errorf(at("rules", i, "domain"), "domain %q takes descriptors; limits and shadow go on each descriptor", name)
	}
	if len(fr.Descriptors) == 0 {
		return v.errorf(at("rules", i, "descriptors"), "domain %q has no descriptors", name)
	}
	d, err := v.domain(at("rules", i), name, fr.Descriptors)
	if err != nil {
		return err
	}
	c.Domains = append(c.Domains, d)
	return nil
}

// Domain returns the domain named name, and whether there is one.
func (c *Config) Domain(name string) (Domain, bool) {
	for _, d := range c.Domains {
		if d.Name == name {
			return d, true
		}
	}
	return Domain{}, false
}
