package rules

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/store/memory"
)

// start is the first instant of the tests' time grid: a minute boundary,
// so that fixed windows of a second to a day all begin there.
var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// newEngine builds an engine for the configuration in yml, over a fresh
// memory store, with a clock at start.
func newEngine(t *testing.T, yml string) (*Engine, *clock, *memory.Store) {
	t.Helper()
	c, err := config.Parse(t.Name()+".yaml", []byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	return engineFor(t, c)
}

func engineFor(t *testing.T, c *config.Config) (*Engine, *clock, *memory.Store) {
	t.Helper()
	st := memory.New(memory.Config{SweepInterval: -1})
	t.Cleanup(func() { st.Close() })
	clk := &clock{t: start}
	e, err := New(Config{Store: st, Rules: c.Rules, Domains: c.Domains, Clock: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	return e, clk, st
}

// desc builds a descriptor from "k=v" pairs.
func desc(pairs ...string) Descriptor {
	var d Descriptor
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		d.Entries = append(d.Entries, Entry{k, v})
	}
	return d
}

// admitted takes n times for the descriptors of domain and returns how
// many requests were allowed.
func admitted(t *testing.T, e *Engine, domain string, n int, ds ...Descriptor) int {
	t.Helper()
	ok := 0
	for range n {
		res, err := e.Check(context.Background(), Request{Domain: domain, Descriptors: ds})
		if err != nil {
			t.Fatalf("Check(%s, %v) error = %v", domain, ds, err)
		}
		if res.Allowed {
			ok++
		}
	}
	return ok
}

// ruleOf returns the ID of the rule a descriptor matches, "" for none.
func ruleOf(t *testing.T, e *Engine, domain string, d Descriptor) string {
	t.Helper()
	res, err := e.Check(context.Background(), Request{Domain: domain, Descriptors: []Descriptor{d}, Op: sluice.OpPeek})
	if err != nil {
		t.Fatalf("Check(%s, %v) error = %v", domain, d, err)
	}
	if r := res.Statuses[0].Rule; r != nil {
		return r.ID
	}
	return ""
}

// A match is a descriptor and the ID of the rule it should match ("":
// none).
type match struct {
	d    Descriptor
	want string
}

// checkMatches checks the rule each descriptor of ms matches in domain.
func checkMatches(t *testing.T, e *Engine, domain string, ms []match) {
	t.Helper()
	for _, m := range ms {
		if got := ruleOf(t, e, domain, m.d); got != m.want {
			t.Errorf("match %v = %q, want %q", m.d.Entries, got, m.want)
		}
	}
}

// TestMatchBasicConfig checks the matches envoyproxy/ratelimit's own test
// asserts for its basic_config.yaml (test/config/config_test.go).
func TestMatchBasicConfig(t *testing.T) {
	c, err := config.Load("../../config/testdata/envoy/good/basic_config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e, _, _ := engineFor(t, c)
	checkMatches(t, e, "test-domain", []match{
		{desc("key1=something"), ""},
		{desc("key1=value1"), ""},
		{desc("key2=value2", "subkey=subvalue"), ""},
		{desc("key5=value5", "subkey5=subvalue"), ""},
		{desc("key1=value1", "subkey1=something"), "test-domain.key1_value1.subkey1"},
		{desc("key1=value1", "subkey1=subvalue1"), "test-domain.key1_value1.subkey1_subvalue1"},
		{desc("key2=something"), "test-domain.key2"},
		{desc("key2=value2"), "test-domain.key2_value2"},
		{desc("key2=value3"), ""}, // a node without a limit whitelists the value
		{desc("key3=foo"), "test-domain.key3"},
		{desc("key4=foo"), "test-domain.key4"},
		{desc("key5=value5"), "test-domain.key5_value5"},
		{desc("key5=value5", "subkey5=subvalue5"), "test-domain.key5_value5.subkey5_subvalue5"},
		{desc("key6=foo"), "test-domain.key6"},
		{desc("key7=unspecified_value"), "test-domain.key7"},
	})
	if r := e.Rule("test-domain.key4"); r == nil || r.Name != "key4_rate_limit" || r.Limits[0].Period != 24*time.Hour || r.Limits[0].Rate != 1 {
		t.Errorf(`Rule("test-domain.key4") = %+v, want key4_rate_limit, 1/day`, r)
	}
	if r := e.Rule("test-domain.key6"); r == nil || !r.Unlimited {
		t.Errorf(`Rule("test-domain.key6") = %+v, want unlimited`, r)
	}
}

// TestMatchWildcard checks wildcard values: trailing, middle and multiple
// '*', under an exact-value parent (test/config/wildcard.yaml).
func TestMatchWildcard(t *testing.T) {
	c, err := config.Load("../../config/testdata/envoy/good/wildcard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e, _, _ := engineFor(t, c)
	checkMatches(t, e, "test-domain", []match{
		{desc("wild=foo"), "test-domain.wild_foo*"},
		{desc("wild=foo1"), "test-domain.wild_foo*"},
		{desc("wild=foobar"), "test-domain.wild_foo*"},
		{desc("wild=fo"), ""},
		{desc("wild=bar"), ""},
		{desc("noWild=foo"), "test-domain.noWild_foo"},
		{desc("noWild=foo1"), ""},
		{desc("noVal=anything"), "test-domain.noVal"},
		{desc("midWild=barb"), "test-domain.midWild_bar*b"},
		{desc("midWild=barXYZb"), "test-domain.midWild_bar*b"},
		{desc("midWild=barXYZ"), ""},
		{desc("midWild=bab"), ""},
		{desc("multiWild=foobarbaz"), "test-domain.multiWild_foo*bar*baz"},
		{desc("multiWild=foo1bar2baz"), "test-domain.multiWild_foo*bar*baz"},
		{desc("multiWild=foobazbar"), ""},
		{desc("nestedWild=val1", "wild=goo2"), "test-domain.nestedWild_val1.wild_goo*"},
		{desc("nestedWild=val1", "wild=foo"), ""},
	})
}

// TestMatchOrder checks the order children are tried in: the exact
// value, then the wildcards in configuration order, then the key alone;
// and that an empty value is the key alone's, when there is one.
func TestMatchOrder(t *testing.T) {
	e, _, _ := newEngine(t, `rules:
  - domain: d
    descriptors:
      - key: k
        value: a
        rate_limit: {unit: minute, requests_per_unit: 1}
      - key: k
        value: a*
        rate_limit: {unit: minute, requests_per_unit: 1}
      - key: k
        value: "*"
        rate_limit: {unit: minute, requests_per_unit: 1}
      - key: k
        rate_limit: {unit: minute, requests_per_unit: 1}
      - key: j
        value: "*"
        rate_limit: {unit: minute, requests_per_unit: 1}
`)
	checkMatches(t, e, "d", []match{
		{desc("k=a"), "d.k_a"},
		{desc("k=ab"), "d.k_a*"},
		{desc("k=b"), "d.k_*"},
		{desc("k="), "d.k"},
		{desc("j="), "d.j_*"},
		{desc("j=x"), "d.j_*"},
		{desc("m=x"), ""},
	})
}

// TestEnvoyReadmeExamples checks the decisions the README of
// envoyproxy/ratelimit documents for its examples 2 to 7, 9 and 11.
func TestEnvoyReadmeExamples(t *testing.T) {
	ctx := context.Background()
	t.Run("2 nested per-value limits", func(t *testing.T) {
		e, _, _ := newEngine(t, `domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: {unit: day, requests_per_unit: 5}
  - key: to_number
    rate_limit: {unit: day, requests_per_unit: 100}
`)
		// Each number gets 5 marketing messages a day.
		for _, n := range []string{"2061111111", "2062222222"} {
			if got := admitted(t, e, "messaging", 7, desc("message_type=marketing", "to_number="+n)); got != 5 {
				t.Errorf("marketing to %s: admitted %d of 7, want 5", n, got)
			}
		}
		// And 100 messages of any kind: the two descriptors together.
		got := admitted(t, e, "messaging", 110, desc("to_number=2063333333"))
		if got != 100 {
			t.Errorf("any message to one number: admitted %d of 110, want 100", got)
		}
	})
	t.Run("3 most specific match", func(t *testing.T) {
		e, _, _ := newEngine(t, `domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
`)
		if got := admitted(t, e, "edge_proxy_per_ip", 12, desc("remote_address=50.0.0.1")); got != 10 {
			t.Errorf("50.0.0.1: admitted %d of 12, want 10", got)
		}
		if got := admitted(t, e, "edge_proxy_per_ip", 3, desc("remote_address=50.0.0.5")); got != 0 {
			t.Errorf("blocked 50.0.0.5: admitted %d of 3, want 0", got)
		}
	})
	t.Run("4 same depth only", func(t *testing.T) {
		e, _, _ := newEngine(t, "domain: example4\ndescriptors:\n  - key: key\n    value: value\n    rate_limit: {requests_per_unit: 300, unit: second}\n")
		if got := ruleOf(t, e, "example4", desc("key=value", "subkey=subvalue")); got != "" {
			t.Errorf("two entries against a one-level rule matched %q, want none", got)
		}
		e, _, _ = newEngine(t, "domain: example4\ndescriptors:\n  - key: key\n    value: value\n    descriptors:\n      - key: subkey\n        rate_limit: {requests_per_unit: 300, unit: second}\n")
		if got := ruleOf(t, e, "example4", desc("key=value", "subkey=subvalue")); got != "example4.key_value.subkey" {
			t.Errorf("two entries against a two-level rule matched %q", got)
		}
	})
	t.Run("5 unlimited", func(t *testing.T) {
		e, _, st := newEngine(t, "domain: internal\ndescriptors:\n  - key: ldap\n    rate_limit: {unlimited: true}\n  - key: azure\n    rate_limit: {unit: minute, requests_per_unit: 100}\n")
		res, err := e.Check(ctx, Request{Domain: "internal", Descriptors: []Descriptor{desc("ldap=x")}, Cost: 1 << 30})
		if err != nil || !res.Allowed || res.Statuses[0].Decision.Remaining != -1 || res.Statuses[0].Rule == nil {
			t.Errorf("unlimited: Check = %+v, %v; want allowed, Remaining -1", res, err)
		}
		if st.Len() != 0 {
			t.Errorf("unlimited: store holds %d states, want 0 (never asked)", st.Len())
		}
	})
	t.Run("6 shadow mode", func(t *testing.T) {
		e, _, _ := newEngine(t, `domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit: {requests_per_unit: 10, unit: second}
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit: {requests_per_unit: 20, unit: second}
`)
		a := desc("service=auth-service", "user=user-a")
		if got := admitted(t, e, "example6", 15, a); got != 15 {
			t.Errorf("user-a (shadow): admitted %d of 15, want 15", got)
		}
		res, _ := e.Check(ctx, Request{Domain: "example6", Descriptors: []Descriptor{a}})
		if st := res.Statuses[0]; !st.Shadowed || st.Decision.Allowed || !st.Allowed {
			t.Errorf("user-a over its shadow limit: status %+v, want shadowed, decision denied, allowed", st)
		}
		if got := admitted(t, e, "example6", 25, desc("service=auth-service", "user=user-b")); got != 20 {
			t.Errorf("user-b: admitted %d of 25, want 20", got)
		}
	})
	t.Run("7 replaces", func(t *testing.T) {
		yml := `domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit: {name: specific_limit, requests_per_unit: 5, unit: second}
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces: [{name: specific_limit}]
          requests_per_unit: 10
          unit: second
`
		one, two := desc("key_1=value_1", "user=bkthomps"), desc("key_2=value_2", "user=bkthomps")
		e, _, _ := newEngine(t, yml)
		if got := admitted(t, e, "example7", 7, one); got != 5 {
			t.Errorf("(key_1, user) alone: admitted %d of 7, want 5", got)
		}
		e, _, _ = newEngine(t, yml)
		if got := admitted(t, e, "example7", 12, two); got != 10 {
			t.Errorf("(key_2, user) alone: admitted %d of 12, want 10", got)
		}
		e, _, _ = newEngine(t, yml)
		if got := admitted(t, e, "example7", 12, one, two); got != 10 {
			t.Errorf("both: admitted %d of 12, want 10 (the 5/s limit replaced)", got)
		}
		// The replaced limit was not affected.
		if got := admitted(t, e, "example7", 7, one); got != 5 {
			t.Errorf("(key_1, user) after both: admitted %d of 7, want 5 (untouched)", got)
		}
		res, _ := e.Check(ctx, Request{Domain: "example7", Descriptors: []Descriptor{one, two}, Op: sluice.OpPeek})
		if st := res.Statuses[0]; st.Rule != nil || st.Replaced == nil || st.Replaced.Name != "specific_limit" {
			t.Errorf("replaced status = %+v, want Rule nil, Replaced specific_limit", st)
		}
	})
	t.Run("11 share threshold", func(t *testing.T) {
		e, _, _ := newEngine(t, `domain: example11
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit: {unit: hour, requests_per_unit: 10}
`)
		admitted(t, e, "example11", 5, desc("files=files/a.pdf"))
		admitted(t, e, "example11", 5, desc("files=files/b.csv"))
		if got := admitted(t, e, "example11", 1, desc("files=files/c.txt")); got != 0 {
			t.Errorf("files/c.txt after 10 shared: admitted %d, want 0", got)
		}
		if got := admitted(t, e, "example11", 12, desc("files_no_share=files_no_share/a.pdf")); got != 10 {
			t.Errorf("files_no_share/a.pdf: admitted %d of 12, want 10", got)
		}
		if got := admitted(t, e, "example11", 12, desc("files_no_share=files_no_share/b.csv")); got != 10 {
			t.Errorf("files_no_share/b.csv: admitted %d of 12, want 10 (its own threshold)", got)
		}
	})
}

// TestWindows checks that Envoy limits are fixed windows aligned to the
// epoch, as Envoy counts them: the allowance comes back at the next unit.
func TestWindows(t *testing.T) {
	e, clk, _ := newEngine(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 3}\n")
	clk.t = start.Add(59 * time.Second)
	if got := admitted(t, e, "d", 5, desc("k=a")); got != 3 {
		t.Errorf("at :59 admitted %d of 5, want 3", got)
	}
	res, _ := e.Check(context.Background(), Request{Domain: "d", Descriptors: []Descriptor{desc("k=a")}})
	if d := res.Statuses[0].Decision; d.RetryAfter != time.Second || d.ResetAfter != time.Second {
		t.Errorf("denied at :59: RetryAfter %v, ResetAfter %v; want 1s, 1s", d.RetryAfter, d.ResetAfter)
	}
	clk.t = start.Add(time.Minute)
	if got := admitted(t, e, "d", 5, desc("k=a")); got != 3 {
		t.Errorf("at 1:00 admitted %d of 5, want 3 (a fresh window)", got)
	}
}

// TestExampleConfig checks envoyproxy/ratelimit's examples/ratelimit
// config (example.yaml): replaces, a blocked value, shadow, unlimited and
// quota mode.
func TestExampleConfig(t *testing.T) {
	c, err := config.Load("../../config/testdata/envoy/good/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	check := func(e *Engine, ds ...Descriptor) Result {
		t.Helper()
		res, err := e.Check(ctx, Request{Domain: "rl", Descriptors: ds})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	e, _, _ := engineFor(t, c)
	if got := admitted(t, e, "rl", 5, desc("foo=x", "bar=banned")); got != 0 {
		t.Errorf("bar=banned: admitted %d, want 0 (requests_per_unit 0)", got)
	}
	// destination_cluster=override replaces banned_limit.
	if got := admitted(t, e, "rl", 3, desc("foo=x", "bar=banned"), desc("source_cluster=proxy", "destination_cluster=override")); got != 2 {
		t.Errorf("banned but replaced by override: admitted %d of 3, want 2", got)
	}
	if got := admitted(t, e, "rl", 5, desc("foo=x", "baz=shady")); got != 5 {
		t.Errorf("baz=shady (shadow): admitted %d of 5, want 5", got)
	}
	if got := admitted(t, e, "rl", 5, desc("foo=x", "bay=anything")); got != 5 {
		t.Errorf("bay (unlimited): admitted %d of 5, want 5", got)
	}
	if got := admitted(t, e, "rl", 5, desc("foo=x")); got != 2 {
		t.Errorf("foo: admitted %d of 5, want 2", got)
	}
	// Quota mode: the request is denied only when every quota
	// descriptor is over its limit.
	e, _, _ = engineFor(t, c)
	s1, s2 := desc("service=service_1"), desc("service=service_2")
	if res := check(e, s1, s2); !res.Allowed {
		t.Errorf("quota 1st: %+v, want allowed", res)
	}
	res := check(e, s1, s2) // service_1 (1/min) is over, service_2 is not
	if !res.Allowed || res.Statuses[0].Allowed || !res.Statuses[1].Allowed {
		t.Errorf("quota 2nd: %+v, want allowed overall, service_1 over", res)
	}
	if res := check(e, s1, s2); res.Allowed {
		t.Errorf("quota 3rd: %+v, want denied (both over)", res)
	}
}

// TestRefundOnDenial checks that a request denied as a whole takes
// nothing: the per-address allowance is not spent by requests that a
// per-path limit denies.
func TestRefundOnDenial(t *testing.T) {
	e, _, _ := newEngine(t, `rules:
  - domain: edge
    descriptors:
      - key: ip
        limits: ["10/min"]
      - key: path
        value: /login
        limits: ["2/min fixed"]
`)
	ip, login := desc("ip=203.0.113.7"), desc("path=/login")
	if got := admitted(t, e, "edge", 5, ip, login); got != 2 {
		t.Fatalf("ip and /login: admitted %d of 5, want 2", got)
	}
	if got := admitted(t, e, "edge", 10, ip); got != 8 {
		t.Errorf("ip afterwards: admitted %d of 10, want 8 (the 3 denied requests refunded)", got)
	}
}

// TestNamedRule checks that a named rule is asked with Key, keeps the
// state of a sluice.Limiter with the same action, and honours shadow.
func TestNamedRule(t *testing.T) {
	e, clk, st := newEngine(t, "rules:\n  - name: login\n    limits: [\"3/min\"]\n  - name: dry\n    limits: [\"1/min\"]\n    shadow: true\n")
	ctx := context.Background()
	if got := admitted(t, e, "login", 2, Key("alice")); got != 2 {
		t.Fatalf("login alice: admitted %d of 2, want 2", got)
	}
	lim, err := sluice.New(st, sluice.Config{Limits: []sluice.Limit{sluice.PerMinute(3)}, Action: "login", Clock: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Peek(ctx, "alice"); err != nil || d.Remaining != 0 {
		t.Errorf("Limiter.Peek(alice) = %+v, %v; want Remaining 0 (3 - 2 taken - 1 peeked: state shared)", d, err)
	}
	if got := admitted(t, e, "dry", 3, Key("bob")); got != 3 {
		t.Errorf("shadow rule: admitted %d of 3, want 3", got)
	}
	if got := ruleOf(t, e, "login", desc("a=1", "b=2")); got != "" {
		t.Errorf("two entries against a named rule matched %q, want none", got)
	}
	// Reset forgets the state.
	if _, err := e.Check(ctx, Request{Domain: "login", Descriptors: []Descriptor{Key("alice")}, Op: sluice.OpReset}); err != nil {
		t.Fatal(err)
	}
	if got := admitted(t, e, "login", 4, Key("alice")); got != 3 {
		t.Errorf("login alice after reset: admitted %d of 4, want 3", got)
	}
}

// TestCosts checks the request's and each descriptor's cost, peeks, and a
// cost above the burst.
func TestCosts(t *testing.T) {
	e, _, _ := newEngine(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 10}\n")
	ctx := context.Background()
	check := func(r Request) Result {
		t.Helper()
		r.Domain = "d"
		res, err := e.Check(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := check(Request{Descriptors: []Descriptor{desc("k=a")}, Cost: 4}); res.Statuses[0].Decision.Remaining != 6 {
		t.Errorf("cost 4: remaining %d, want 6", res.Statuses[0].Decision.Remaining)
	}
	peek := desc("k=a")
	peek.NoHits = true
	if res := check(Request{Descriptors: []Descriptor{peek}, Cost: 4}); res.Statuses[0].Decision.Remaining != 6 || !res.Allowed {
		t.Errorf("no hits: %+v, want allowed, remaining 6 (what is left)", res.Statuses[0])
	}
	if res := check(Request{Descriptors: []Descriptor{desc("k=a")}, Cost: 4, Op: sluice.OpPeek}); res.Statuses[0].Decision.Remaining != 2 || !res.Allowed {
		t.Errorf("peek 4: %+v, want allowed, remaining 2 (what a take would leave)", res.Statuses[0])
	}
	two := desc("k=a")
	two.Cost = 2
	if res := check(Request{Descriptors: []Descriptor{two}, Cost: 4}); res.Statuses[0].Decision.Remaining != 4 {
		t.Errorf("descriptor cost 2: remaining %d, want 4", res.Statuses[0].Decision.Remaining)
	}
	res := check(Request{Descriptors: []Descriptor{desc("k=a")}, Cost: 11})
	if st := res.Statuses[0]; res.Allowed || !errors.Is(st.Err, sluice.ErrCostExceedsBurst) {
		t.Errorf("cost 11 of 10: %+v, want denied with ErrCostExceedsBurst", res)
	}
}

// TestCheckErrors checks malformed requests.
func TestCheckErrors(t *testing.T) {
	e, _, _ := newEngine(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 10}\n")
	many := make([]Descriptor, DefaultMaxDescriptors+1)
	for i := range many {
		many[i] = desc("k=v")
	}
	tests := []struct {
		name string
		r    Request
		want error
	}{
		{"unknown domain", Request{Domain: "nope", Descriptors: []Descriptor{desc("k=v")}}, ErrUnknownDomain},
		{"no descriptors", Request{Domain: "d"}, sluice.ErrInvalidRequest},
		{"too many", Request{Domain: "d", Descriptors: many}, ErrTooManyDescriptors},
		{"no entries", Request{Domain: "d", Descriptors: []Descriptor{{}}}, sluice.ErrInvalidRequest},
		{"negative cost", Request{Domain: "d", Descriptors: []Descriptor{desc("k=v")}, Cost: -1}, sluice.ErrInvalidRequest},
		{"refund", Request{Domain: "d", Descriptors: []Descriptor{desc("k=v")}, Op: sluice.OpRefund}, sluice.ErrInvalidRequest},
	}
	for _, tt := range tests {
		if _, err := e.Check(context.Background(), tt.r); !errors.Is(err, tt.want) {
			t.Errorf("%s: Check error = %v, want %v", tt.name, err, tt.want)
		}
	}
}

// TestStateKeys checks that entries that differ name different states,
// whatever bytes they hold, and that long ones are bounded.
func TestStateKeys(t *testing.T) {
	e, _, _ := newEngine(t, "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n        rate_limit: {unit: minute, requests_per_unit: 1}\n")
	pairs := [][2]Descriptor{
		{desc("a=x,b=y", "b=z"), desc("a=x", "b=y,b=z")},
		{desc("a=x=", "b=y"), desc("a=x", "b==y")},
		{desc("a=%2C", "b=y"), desc("a=,", "b=y")},
		{desc("a="+strings.Repeat("x", 200), "b=1"), desc("a="+strings.Repeat("x", 200), "b=2")},
	}
	for _, p := range pairs {
		for _, d := range p {
			if got := admitted(t, e, "d", 1, d); got != 1 {
				t.Errorf("first request of %q: admitted %d, want 1 (its own state)", d.Entries, got)
			}
		}
	}
	var buf []byte
	_, key := e.domains["d"].match([]Entry{{"a", strings.Repeat("é", 1000)}, {"b", "1"}}, buf)
	if k := stateKey(key); len(k) != 44 || k[0] != '#' {
		t.Errorf("stateKey(2 KB) = %q, want '#' and 43 bytes of hash", k)
	}
}

// TestUnlimitedRemaining checks what an unlimited rule reports: Remaining
// -1, which the Envoy API turns into MaxUint32.
func TestUnlimitedRemaining(t *testing.T) {
	e, _, _ := newEngine(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true}\n")
	res, err := e.Check(context.Background(), Request{Domain: "d", Descriptors: []Descriptor{desc("k=v")}, Cost: math.MaxInt32})
	if err != nil || !res.Allowed || res.Statuses[0].Decision.Remaining != -1 {
		t.Errorf("Check = %+v, %v", res, err)
	}
}

// TestNewRejects checks that an engine that could not decide is never
// built: every error is the configuration's, said at once.
func TestNewRejects(t *testing.T) {
	c, err := config.Parse("n.yaml", []byte("rules:\n  - name: login\n    limits: [\"5/min\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New(memory.Config{SweepInterval: -1})
	t.Cleanup(func() { st.Close() })
	for _, tt := range []struct {
		name string
		c    Config
	}{
		{"nil store", Config{Rules: c.Rules}},
		{"no rules", Config{Store: st}},
		{"duplicate rule", Config{Store: st, Rules: append(c.Rules, c.Rules[0])}},
		{"invalid limit", Config{Store: st, Rules: []config.NamedRule{{Name: "x", Limits: []sluice.Limit{{Rate: 0, Period: time.Second}}}}}},
		{"long namespace", Config{Store: st, Rules: c.Rules, Namespace: strings.Repeat("n", 200)}},
	} {
		if _, err := New(tt.c); !errors.Is(err, sluice.ErrInvalidRequest) && !errors.Is(err, sluice.ErrInvalidLimit) {
			t.Errorf("New(%s) error = %v, want an invalid request or limit", tt.name, err)
		}
	}
}
