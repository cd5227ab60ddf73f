package config

import (
	"fmt"
	"reflect"
	"time"
)

// Defaults of the quota section.
const (
	// DefaultReportInterval is the report interval of the edges, as
	// Envoy's filter is told it (reporting_interval).
	DefaultReportInterval = time.Second
	// DefaultQuotaIdle is how long a bucket may report no request
	// before it is abandoned.
	DefaultQuotaIdle = time.Minute
	// DefaultMaxBuckets is how many buckets one stream may hold.
	DefaultMaxBuckets = 1000
	// DefaultQuotaReserve is the part of a rule's limit that the edges
	// holding a share leave free for those that hold none yet.
	DefaultQuotaReserve = 0.05
	// MaxBucketEntries and MaxBucketBytes bound a bucket id the service
	// tracks: its entries, and their keys' and values' bytes in all.
	MaxBucketEntries = 16
	MaxBucketBytes   = 1024
)

// Quota configures the edge quotas: the Rate Limit Quota Service (RLQS)
// that Envoy's rate_limit_quota filter asks on the gRPC listener, and
// the shares the Go client asks for. Each configured bucket maps the
// bucket ids of a domain to a named rule, whose limit the edges that
// report a bucket id divide among them (see docs/service.md). Every
// field is reloaded with the rest of the configuration. A configuration
// without a quota section has the zero Quota: no buckets, so that every
// bucket is unknown.
type Quota struct {
	// ReportInterval is how often the edges report each bucket
	// (reporting_interval in Envoy's filter): the service measures
	// their demand over it. Default DefaultReportInterval.
	ReportInterval time.Duration
	// TTL is the assignment_time_to_live of every assignment, a whole
	// number of seconds (Envoy reads only the seconds) longer than
	// ReportInterval: a share counts that long after its edge's last
	// report. Default 3 × ReportInterval, rounded up to whole seconds.
	TTL time.Duration
	// Burst is how much of its share an edge may spend at once, as the
	// time its share takes to earn that much: an assignment's token
	// bucket holds share × Burst / period tokens (at least 1). Every new
	// assignment starts full, and a share may change at every report, so
	// Burst bounds what a change of shares can admit beyond the limit
	// (docs/service.md): a tenth of ReportInterval is a tenth more at
	// most. Default ReportInterval / 10.
	Burst time.Duration
	// Idle is how long a bucket may report no request before the
	// service abandons it (and gives its share back). At least TTL.
	// Default DefaultQuotaIdle.
	Idle time.Duration
	// Reserve is the part of each bucket's rule limit, 0 to 0.5, that
	// the shares of the edges that hold one leave free for the edges
	// that hold none yet: a new edge's first answer is a share of it
	// (half of what is free), not a DENY_ALL until the others report
	// again, and the others shrink at their next reports. While the
	// edges' demands exceed the limit they admit that part less of it.
	// 0 keeps none: a new edge of a bucket whose limit the others hold
	// whole is refused until they report. Default DefaultQuotaReserve.
	Reserve float64
	// MaxBuckets bounds the buckets one stream holds: a further bucket
	// is answered with the blanket rule of unknown buckets (deny by
	// default), and not tracked. Default DefaultMaxBuckets.
	MaxBuckets int
	// AllowUnknown answers a bucket that no configured bucket matches
	// with a blanket ALLOW_ALL instead of DENY_ALL (the default).
	AllowUnknown bool
	// Buckets map bucket ids to rules, in file order: the first that
	// matches applies.
	Buckets []QuotaBucket
}

// A QuotaBucket maps the bucket ids of a domain to a named rule: every
// distinct bucket id it matches is a key of the rule, whose limit the
// edges reporting that id divide.
type QuotaBucket struct {
	// Name labels the bucket's metrics and dashboard row: 1 to 64
	// letters, digits, '_', '-' or '.', unique. Default the rule's name.
	Name string
	// Domain is the domain of Envoy's filter (its domain field).
	// Required.
	Domain string
	// Match holds the entries a bucket id must have, with these values;
	// its other entries may be anything. Default none: every bucket id
	// of the domain.
	Match map[string]string
	// Rule is a named rule of one limit whose period is a whole number
	// of seconds (such as 1000/s, 600/min), not shadow. Required.
	Rule string
	// Actor is the entry whose value the guard judges (the allow and
	// deny lists, bans): a banned value's bucket is answered DENY_ALL.
	// Default none: the guard judges the bucket id itself, as a key.
	Actor string
}

type fileQuota struct {
	ReportInterval time.Duration     `yaml:"report_interval"`
	TTL            time.Duration     `yaml:"ttl"`
	Burst          time.Duration     `yaml:"burst"`
	Idle           time.Duration     `yaml:"idle"`
	Reserve        *float64          `yaml:"reserve"`
	MaxBuckets     int               `yaml:"max_buckets"`
	Unknown        string            `yaml:"unknown"`
	Buckets        []fileQuotaBucket `yaml:"buckets"`
}

type fileQuotaBucket struct {
	Name   string            `yaml:"name"`
	Domain string            `yaml:"domain"`
	Match  map[string]string `yaml:"match"`
	Rule   string            `yaml:"rule"`
	Actor  string            `yaml:"actor"`
}

// quota validates the quota section against the rules of c. A file
// without one has the zero Quota: no buckets, every setting unset.
func (f *fileQuota) quota(v *validator, c *Config) (Quota, error) {
	if reflect.ValueOf(*f).IsZero() {
		return Quota{}, nil
	}
	q := Quota{ReportInterval: f.ReportInterval, TTL: f.TTL, Burst: f.Burst, Idle: f.Idle, MaxBuckets: f.MaxBuckets}
	if err := f.settings(v, &q); err != nil {
		return q, err
	}
	names := map[string]bool{}
	for i, fb := range f.Buckets {
		b, err := fb.bucket(v, i, c)
		if err != nil {
			return q, err
		}
		if names[b.Name] {
			return q, v.errorf(at("quota", "buckets", i, "name"), "bucket %q defined twice", b.Name)
		}
		names[b.Name] = true
		q.Buckets = append(q.Buckets, b)
	}
	return q, nil
}

// settings validates the section's settings and sets their defaults.
func (f *fileQuota) settings(v *validator, q *Quota) error {
	switch f.Unknown {
	case "", "deny":
	case "allow":
		q.AllowUnknown = true
	default:
		return v.errorf(at("quota", "unknown"), "unknown %q (want deny or allow)", f.Unknown)
	}
	switch {
	case q.ReportInterval == 0:
		q.ReportInterval = DefaultReportInterval
	case q.ReportInterval < 0:
		return v.errorf(at("quota", "report_interval"), "report_interval %v must be positive", q.ReportInterval)
	}
	switch {
	case q.TTL == 0:
		q.TTL = (3*q.ReportInterval + time.Second - 1).Truncate(time.Second)
	case q.TTL%time.Second != 0 || q.TTL <= q.ReportInterval:
		return v.errorf(at("quota", "ttl"), "ttl %v must be whole seconds (Envoy reads only those), longer than report_interval %v", q.TTL, q.ReportInterval)
	}
	switch {
	case q.Burst == 0:
		q.Burst = q.ReportInterval / 10
	case q.Burst < 0:
		return v.errorf(at("quota", "burst"), "burst %v must be positive", q.Burst)
	}
	switch {
	case q.Idle == 0:
		q.Idle = max(DefaultQuotaIdle, q.TTL)
	case q.Idle < q.TTL:
		return v.errorf(at("quota", "idle"), "idle %v must be at least ttl %v", q.Idle, q.TTL)
	}
	switch r := f.Reserve; {
	case r == nil:
		q.Reserve = DefaultQuotaReserve
	case !(*r >= 0 && *r <= 0.5):
		return v.errorf(at("quota", "reserve"), "reserve %v must be from 0 to 0.5 (a part of the limit)", *r)
	default:
		q.Reserve = *r
	}
	switch {
	case q.MaxBuckets == 0:
		q.MaxBuckets = DefaultMaxBuckets
	case q.MaxBuckets < 0:
		return v.errorf(at("quota", "max_buckets"), "max_buckets %d must be at least 1", q.MaxBuckets)
	}
	return nil
}

// bucket validates bucket i against the rules of c.
func (fb *fileQuotaBucket) bucket(v *validator, i int, c *Config) (QuotaBucket, error) {
	path := func(field string) []any { return at("quota", "buckets", i, field) }
	b := QuotaBucket{Name: fb.Name, Domain: fb.Domain, Match: fb.Match, Rule: fb.Rule, Actor: fb.Actor}
	if b.Domain == "" {
		return b, v.errorf(path("domain"), "a bucket needs the domain of Envoy's filter")
	}
	r, ok := c.Rule(b.Rule)
	switch {
	case b.Rule == "":
		return b, v.errorf(path("rule"), "a bucket needs a rule")
	case !ok:
		return b, v.errorf(path("rule"), "no named rule %q", b.Rule)
	case len(r.Limits) != 1:
		return b, v.errorf(path("rule"), "rule %q has %d limits; a bucket divides one", b.Rule, len(r.Limits))
	case r.Limits[0].Period%time.Second != 0:
		return b, v.errorf(path("rule"), "rule %q: period %v is not whole seconds (Envoy's token buckets fill per second)", b.Rule, r.Limits[0].Period)
	case r.Shadow:
		return b, v.errorf(path("rule"), "rule %q is shadow: an edge cannot count without denying", b.Rule)
	}
	if b.Name == "" {
		b.Name = b.Rule
	}
	if !ruleName.MatchString(b.Name) {
		return b, v.errorf(path("name"), "bucket name %q: want 1 to 64 letters, digits, '_', '-' or '.'", b.Name)
	}
	size := 0
	for k, val := range b.Match {
		if k == "" || val == "" {
			return b, v.errorf(path("match"), "an entry needs a key and a value (%q: %q)", k, val)
		}
		size += len(k) + len(val)
	}
	if len(b.Match) > MaxBucketEntries || size > MaxBucketBytes {
		return b, v.errorf(path("match"), "%d entries of %d bytes: a bucket id has at most %d entries of %d bytes", len(b.Match), size, MaxBucketEntries, MaxBucketBytes)
	}
	return b, nil
}

// String names the bucket in logs: its name, domain and rule.
func (b QuotaBucket) String() string {
	return fmt.Sprintf("%s (domain %s, rule %s)", b.Name, b.Domain, b.Rule)
}
