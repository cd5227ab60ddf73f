package config

import (
	"reflect"
	"testing"
	"time"
)

const quotaRules = `rules:
  - name: api
    limits: ["1000/s"]
  - name: two
    limits: ["10/s", "100/min"]
  - name: fast
    limits: ["10/100ms"]
  - name: dry
    limits: ["10/s"]
    shadow: true
`

func TestParseQuota(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Quota
	}{
		{"none", "", Quota{}},
		{"defaults", "quota: {unknown: deny}\n", Quota{ReportInterval: time.Second, TTL: 3 * time.Second, Burst: 100 * time.Millisecond,
			Idle: time.Minute, Reserve: DefaultQuotaReserve, MaxBuckets: DefaultMaxBuckets}},
		{"a bucket", `quota:
  report_interval: 2s
  burst: 250ms
  unknown: allow
  buckets:
    - {domain: edge, match: {name: api}, rule: api, actor: tenant}
`, Quota{ReportInterval: 2 * time.Second, TTL: 6 * time.Second, Burst: 250 * time.Millisecond, Idle: time.Minute,
			Reserve: DefaultQuotaReserve, MaxBuckets: DefaultMaxBuckets, AllowUnknown: true,
			Buckets: []QuotaBucket{{Name: "api", Domain: "edge", Match: map[string]string{"name": "api"}, Rule: "api", Actor: "tenant"}}}},
		{"ttl and idle", "quota: {report_interval: 500ms, ttl: 2s, idle: 10s, max_buckets: 5}\n",
			Quota{ReportInterval: 500 * time.Millisecond, TTL: 2 * time.Second, Burst: 50 * time.Millisecond, Idle: 10 * time.Second,
				Reserve: DefaultQuotaReserve, MaxBuckets: 5}},
		{"no reserve", "quota: {reserve: 0}\n", Quota{ReportInterval: time.Second, TTL: 3 * time.Second, Burst: 100 * time.Millisecond,
			Idle: time.Minute, MaxBuckets: DefaultMaxBuckets}},
		{"a tenth", "quota: {reserve: 0.1}\n", Quota{ReportInterval: time.Second, TTL: 3 * time.Second, Burst: 100 * time.Millisecond,
			Idle: time.Minute, Reserve: 0.1, MaxBuckets: DefaultMaxBuckets}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("q.yaml", []byte(quotaRules+tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Quota, tt.want) {
				t.Errorf("Quota = %+v, want %+v", c.Quota, tt.want)
			}
		})
	}
}

func TestParseQuotaErrors(t *testing.T) {
	tests := []parseError{
		{"no domain", "quota: {buckets: [{rule: api}]}\n", []string{"q.yaml:11:19: quota.buckets[0].domain:", "domain of Envoy's filter"}},
		{"no rule", "quota: {buckets: [{domain: e}]}\n", []string{"quota.buckets[0].rule: a bucket needs a rule"}},
		{"unknown rule", "quota: {buckets: [{domain: e, rule: nope}]}\n", []string{`quota.buckets[0].rule: no named rule "nope"`}},
		{"two limits", "quota: {buckets: [{domain: e, rule: two}]}\n", []string{`rule "two" has 2 limits`}},
		{"sub-second", "quota: {buckets: [{domain: e, rule: fast}]}\n", []string{"period 100ms is not whole seconds"}},
		{"shadow", "quota: {buckets: [{domain: e, rule: dry}]}\n", []string{`rule "dry" is shadow`}},
		{"dup", "quota:\n  buckets:\n    - {domain: e, rule: api}\n    - {domain: f, rule: api}\n", []string{"q.yaml:14:7: quota.buckets[1].name:", `bucket "api" defined twice`}},
		{"bad name", "quota: {buckets: [{name: \"a b\", domain: e, rule: api}]}\n", []string{"quota.buckets[0].name:"}},
		{"empty match", "quota: {buckets: [{domain: e, rule: api, match: {name: \"\"}}]}\n", []string{"quota.buckets[0].match: an entry needs a key and a value"}},
		{"unknown", "quota: {unknown: maybe}\n", []string{"quota.unknown:", `unknown "maybe"`}},
		{"interval", "quota: {report_interval: -1s}\n", []string{"quota.report_interval:"}},
		{"ttl fraction", "quota: {ttl: 2500ms}\n", []string{"quota.ttl:", "whole seconds"}},
		{"ttl short", "quota: {report_interval: 2s, ttl: 2s}\n", []string{"quota.ttl:", "longer than report_interval"}},
		{"burst", "quota: {burst: -1s}\n", []string{"quota.burst:"}},
		{"idle", "quota: {ttl: 5s, idle: 4s}\n", []string{"quota.idle:", "at least ttl"}},
		{"max_buckets", "quota: {max_buckets: -1}\n", []string{"quota.max_buckets:"}},
		{"reserve negative", "quota: {reserve: -0.1}\n", []string{"quota.reserve:", "from 0 to 0.5"}},
		{"reserve too much", "quota: {reserve: 0.6}\n", []string{"quota.reserve:", "from 0 to 0.5"}},
		{"reserve NaN", "quota: {reserve: .nan}\n", []string{"quota.reserve:"}},
		{"unknown field", "quota: {bucket: []}\n", []string{`quota: unknown field "bucket"; did you mean "buckets"?`}},
		{"unknown bucket field", "quota: {buckets: [{domain: e, rule: api, key: x}]}\n", []string{`quota.buckets[0]: unknown field "key"`}},
	}
	checkParseErrors(t, "q.yaml", quotaRules, tests)
}
