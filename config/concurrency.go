package config

import (
	"errors"
	"time"

	"github.com/sluicehq/sluice"
)

// A ConcurrencyRule is a rule of the rules section that limits how many
// requests per key are in flight rather than how many per period: a
// rule with a concurrency block and no limits. Clients acquire a lease
// (POST /v1/acquire, or the gRPC Leases service), release it when done,
// and extend it while long work runs.
type ConcurrencyRule struct {
	// Name identifies the rule, unique among every rule and domain, and
	// is the action of its keys.
	Name string
	// Limit is how many leases may be live per key: 1 to
	// sluice.MaxLeases.
	Limit int
	// TTL is how long a lease lives unless extended. Default
	// sluice.DefaultLeaseTTL (30s).
	TTL time.Duration
	// MaxWait bounds how long a client may ask the service to wait for a
	// place (the request's wait). Default 10s; at most a minute.
	MaxWait time.Duration
	// Shares are the classes' shares of Limit. Default sluice's: sheddable
	// below 50% in use, default below 80%, critical to 100%.
	Shares sluice.Shares
}

// fileConcurrency is the YAML form of a ConcurrencyRule's settings.
type fileConcurrency struct {
	Limit           int     `yaml:"limit"`
	TTL             string  `yaml:"ttl"`
	MaxWait         string  `yaml:"max_wait"`
	Sheddable       float64 `yaml:"sheddable"`
	CriticalReserve float64 `yaml:"critical_reserve"`
}

// Concurrent returns the concurrency rule named name, and whether there
// is one.
func (c *Config) Concurrent(name string) (ConcurrencyRule, bool) {
	for _, r := range c.Concurrency {
		if r.Name == name {
			return r, true
		}
	}
	return ConcurrencyRule{}, false
}

// concurrencyRule validates the rule of index i, fr, a concurrency rule
// named name, and adds it to c.
func (v *validator) concurrencyRule(c *Config, i int, name string, fr fileRule) error {
	fc := fr.Concurrency
	p := func(field string) []any { return at("rules", i, "concurrency", field) }
	var errs [6]error
	if len(fr.Limits) > 0 || fr.Shadow || len(fr.Descriptors) > 0 {
		errs[0] = v.errorf(at("rules", i, "concurrency"), "rule %q: a concurrency rule takes no limits, shadow or descriptors", name)
	}
	if fc.Limit < 1 || fc.Limit > sluice.MaxLeases {
		errs[1] = v.errorf(p("limit"), "rule %q: limit %d: want 1 to %d requests in flight", name, fc.Limit, sluice.MaxLeases)
	}
	r := ConcurrencyRule{Name: name, Limit: fc.Limit, TTL: sluice.DefaultLeaseTTL, MaxWait: 10 * time.Second,
		Shares: sluice.Shares{Sheddable: fc.Sheddable, CriticalReserve: fc.CriticalReserve}}
	r.TTL, errs[2] = v.leaseDuration(p("ttl"), fc.TTL, r.TTL, sluice.MinLeaseTTL, sluice.MaxLeaseTTL)
	r.MaxWait, errs[3] = v.leaseDuration(p("max_wait"), fc.MaxWait, r.MaxWait, 0, time.Minute)
	if s := r.Shares.Sheddable; !(s >= 0 && s <= 1) {
		errs[4] = v.errorf(p("sheddable"), "sheddable %v must be in [0, 1] (0: the default, 0.5)", s)
	}
	if s := r.Shares.CriticalReserve; !(s >= 0 && s < 1) {
		errs[5] = v.errorf(p("critical_reserve"), "critical_reserve %v must be in [0, 1) (0: the default, 0.2)", s)
	}
	if err := errors.Join(errs[:]...); err != nil {
		return err
	}
	c.Concurrency = append(c.Concurrency, r)
	return nil
}

// leaseDuration parses s, a duration from lo to hi, or returns def when
// s is empty.
func (v *validator) leaseDuration(path []any, s string, def, lo, hi time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < lo || d > hi {
		return 0, v.errorf(path, "%q: want a duration from %v to %v, such as 30s", s, lo, hi)
	}
	return d, nil
}
