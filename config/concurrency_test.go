package config

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestParseConcurrency(t *testing.T) {
	c, err := Parse("t.yaml", []byte(`
rules:
  - name: login
    limits: ["5/min"]
  - name: reports
    concurrency: {limit: 10, ttl: 2m, max_wait: 5s, sheddable: 0.4, critical_reserve: 0.3}
  - name: exports
    concurrency: {limit: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []ConcurrencyRule{
		{Name: "reports", Limit: 10, TTL: 2 * time.Minute, MaxWait: 5 * time.Second, Shares: sluice.Shares{Sheddable: 0.4, CriticalReserve: 0.3}},
		{Name: "exports", Limit: 1, TTL: sluice.DefaultLeaseTTL, MaxWait: 10 * time.Second},
	}
	if len(c.Concurrency) != 2 || c.Concurrency[0] != want[0] || c.Concurrency[1] != want[1] {
		t.Errorf("Concurrency = %+v, want %+v", c.Concurrency, want)
	}
	if len(c.Rules) != 1 || c.Rules[0].Name != "login" {
		t.Errorf("Rules = %+v, want login only", c.Rules)
	}
	if r, ok := c.Concurrent("exports"); !ok || r.Limit != 1 {
		t.Errorf("Concurrent(exports) = %+v, %v", r, ok)
	}
}

func TestParseConcurrencyErrors(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{name: r, concurrency: {limit: 0}}`, "t.yaml:2:36: rules[0].concurrency.limit: rule \"r\": limit 0"},
		{`{name: r, concurrency: {limit: 70000}}`, "want 1 to 65536"},
		{`{name: r, concurrency: {limit: 2, ttl: forever}}`, "rules[0].concurrency.ttl: \"forever\""},
		{`{name: r, concurrency: {limit: 2, ttl: 48h}}`, "want a duration from 1ms to 24h0m0s"},
		{`{name: r, concurrency: {limit: 2, max_wait: 2m}}`, "rules[0].concurrency.max_wait"},
		{`{name: r, concurrency: {limit: 2, sheddable: 1.5}}`, "sheddable 1.5 must be in [0, 1]"},
		{`{name: r, concurrency: {limit: 2, critical_reserve: 1}}`, "t.yaml:2:57: rules[0].concurrency.critical_reserve: critical_reserve 1 must be in [0, 1)"},
		{`{name: r, limits: ["1/s"], concurrency: {limit: 2}}`, "a concurrency rule takes no limits"},
		{`{name: r, concurrency: {limit: 2, burst: 3}}`, `t.yaml:2:39: rules[0].concurrency: unknown field "burst"`},
	} {
		_, err := Parse("t.yaml", []byte("rules:\n  - "+tt.in+"\n"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%s) error = %v, want it to contain %q", tt.in, err, tt.want)
		}
	}
	if _, err := Parse("t.yaml", []byte("rules:\n  - {name: r, concurrency: {limit: 2}}\n")); err == nil || !strings.Contains(err.Error(), "only concurrency rules") {
		t.Errorf("only a concurrency rule: error %v, want one asking for a rule with limits", err)
	}
	_, err := Parse("t.yaml", []byte("rules:\n  - {name: r, concurrency: {limit: 2}}\n  - {name: r, limits: [\"1/s\"]}\n"))
	if err == nil || !strings.Contains(err.Error(), "already defined at line 2") {
		t.Errorf("a rate rule named as a concurrency rule: error %v, want already defined", err)
	}
}
