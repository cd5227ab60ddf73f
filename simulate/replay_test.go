package simulate

import (
	"bytes"
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/simulate/accesslog"
	"github.com/sluicehq/sluice/simulate/loggen"
)

// window is a reference of one limit for one key, written from the
// limit's definition alone: a fixed window counts the admitted requests
// of the aligned window holding t; a sliding log, those of (t-period, t].
type window struct {
	rate    int
	period  int64
	sliding bool
	fixed   map[string][2]int64 // key: window index, count
	log     map[string][]int64  // key: times admitted
}

func (w *window) allows(key string, t int64) bool {
	if w.sliding {
		n := 0
		for _, at := range w.log[key] {
			if at > t-w.period {
				n++
			}
		}
		return n < w.rate
	}
	c := w.fixed[key]
	return c[0] != t/w.period || c[1] < int64(w.rate)
}

func (w *window) admit(key string, t int64) {
	if w.sliding {
		l := w.log[key]
		for len(l) > 0 && l[0] <= t-w.period { // keep the window's only
			l = l[1:]
		}
		w.log[key] = append(l, t)
		return
	}
	c := w.fixed[key]
	if c[0] != t/w.period {
		c = [2]int64{t / w.period, 0}
	}
	c[1]++
	w.fixed[key] = c
}

// reference decides requests for one rule of several limits, all or
// nothing, and counts denials per key: the requests under prefix, but
// not under except.
type reference struct {
	prefix string
	except string
	limits []*window
	denied map[string]int64
	total  int64
}

func newReference(prefix string, limits ...*window) *reference {
	for _, l := range limits {
		l.fixed, l.log = map[string][2]int64{}, map[string][]int64{}
	}
	return &reference{prefix: prefix, limits: limits, denied: map[string]int64{}}
}

func (r *reference) decide(ev loggen.Event) {
	if !strings.HasPrefix(ev.URI, r.prefix) || (r.except != "" && strings.HasPrefix(ev.URI, r.except)) {
		return
	}
	key := ev.Addr.String()
	if ev.Addr.Is6() { // forward-auth keys IPv6 clients by their /64
		key = netip.PrefixFrom(ev.Addr, 64).Masked().String()
	}
	t := ev.Time.Truncate(time.Second).UnixNano() // the log's resolution
	for _, l := range r.limits {
		if !l.allows(key, t) {
			r.denied[key]++
			r.total++
			return
		}
	}
	for _, l := range r.limits {
		l.admit(key, t)
	}
}

// generate returns n requests of the generator as a combined log, and
// the same requests as events.
func generate(n int, c loggen.Config) ([]byte, []loggen.Event) {
	g := loggen.New(n, c)
	var log []byte
	evs := make([]loggen.Event, n)
	for i := range evs {
		evs[i] = g.Next()
		log = append(g.AppendCombined(log, evs[i]), '\n')
	}
	return log, evs
}

func parseConfig(t *testing.T, text string) *config.Config {
	t.Helper()
	c, err := configFor(text)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func configFor(text string) (*config.Config, error) { return config.Parse("rules.yaml", []byte(text)) }

// TestReplayMatchesReference replays generated traffic (Zipf clients, a
// botnet, an IPv6 rotator, a crawler) and checks every rule's denials,
// in total and per key, against a reference computed from the events.
func TestReplayMatchesReference(t *testing.T) {
	log, evs := generate(60_000, loggen.Config{Duration: time.Hour, Seed: 11})
	cfg := parseConfig(t, `rules:
  - name: web
    limits: ["50/min fixed"]
  - name: login
    limits: ["2/min fixed", "4/h log"]
`)
	rep, err := Run(context.Background(), Options{
		Config: Config{Rules: cfg, Routes: []Route{{Rule: "web"}, {Rule: "login", PathPrefix: "/login"}}, Sketch: 1 << 14},
		Stdin:  bytes.NewReader(log),
	})
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]*reference{
		"web":   newReference("", &window{rate: 50, period: int64(time.Minute)}),
		"login": newReference("/login", &window{rate: 2, period: int64(time.Minute)}, &window{rate: 4, period: int64(time.Hour), sliding: true}),
	}
	refs["web"].except = "/login" // taken by the longer prefix
	for _, ev := range evs {
		refs["web"].decide(ev)
		refs["login"].decide(ev)
	}
	if rep.Requests != int64(len(evs)) || rep.Malformed != 0 {
		t.Fatalf("report: %d requests, %d malformed; want %d, 0", rep.Requests, rep.Malformed, len(evs))
	}
	for _, rr := range rep.Rules {
		ref := refs[rr.Rule]
		t.Logf("rule %s: %d requests, %d denied of %d keys", rr.Rule, rr.Requests, rr.WouldDeny, rr.DeniedKeys)
		if rr.WouldDeny != ref.total || rr.WouldDeny == 0 {
			t.Errorf("rule %s: would deny %d, reference %d (want equal, and some)", rr.Rule, rr.WouldDeny, ref.total)
		}
		if want := int64(len(ref.denied)); rr.DeniedKeys < want*97/100 || rr.DeniedKeys > want*103/100+2 {
			t.Errorf("rule %s: denied keys %d, reference %d (want within 3%%)", rr.Rule, rr.DeniedKeys, want)
		}
		for _, k := range rr.TopDenied {
			if k.Err == 0 && k.Denied != ref.denied[k.Key] {
				t.Errorf("rule %s: key %s denied %d, reference %d", rr.Rule, k.Key, k.Denied, ref.denied[k.Key])
			}
		}
		if len(rr.TopDenied) == 0 || rr.TopDenied[0].Denied < ref.max() {
			t.Errorf("rule %s: top denied %v, reference's most denied key %d times", rr.Rule, rr.TopDenied, ref.max())
		}
	}
}

func (r *reference) max() int64 {
	var m int64
	for _, n := range r.denied {
		m = max(m, n)
	}
	return m
}

// TestCallerCache replays one address as a trusted proxy's and as a
// client's, with and without the X-Forwarded-For it logged, and with
// keys that read more than the address: every line is keyed as
// forward-auth keys it, whether the address's Caller was cached or not.
func TestCallerCache(t *testing.T) {
	proxied := "forward_auth:\n  trusted_proxies: [10.0.0.0/8]\n"
	rules := "rules:\n  - name: web\n    limits: [\"100/s\"]\n"
	entry := func(addr, fwd, path string) *accesslog.Entry {
		return &accesslog.Entry{Time: 1e18, Addr: []byte(addr), Forwarded: []byte(fwd), URI: []byte(path), Method: []byte("GET")}
	}
	tests := []struct {
		name   string
		config string
		lines  []*accesslog.Entry
		keys   []string
	}{
		{"address, proxied", rules + proxied,
			[]*accesslog.Entry{entry("10.0.0.1", "", "/"), entry("10.0.0.1", "203.0.113.9", "/"), entry("10.0.0.1", "", "/"), entry("10.0.0.1", "198.51.100.4", "/")},
			[]string{"10.0.0.1", "203.0.113.9", "10.0.0.1", "198.51.100.4"}},
		{"address and path", rules + "forward_auth:\n  key: [ip, path]\n",
			[]*accesslog.Entry{entry("203.0.113.9", "", "/a"), entry("203.0.113.9", "", "/b"), entry("203.0.113.9", "", "/a")},
			[]string{"203.0.113.9|/a", "203.0.113.9|/b", "203.0.113.9|/a"}},
		{"IPv6 networks", rules,
			[]*accesslog.Entry{entry("2001:db8:1:2::1", "", "/"), entry("2001:db8:1:3::1", "", "/"), entry("2001:db8:1:2::1", "", "/")},
			[]string{"2001:db8:1:2::/64", "2001:db8:1:3::/64", "2001:db8:1:2::/64"}},
	}
	for _, tt := range tests {
		r, err := NewReplayer(context.Background(), Config{Rules: parseConfig(t, tt.config)})
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range tt.lines {
			r.Decide(context.Background(), e)
			if rs := r.routes[0]; !rs.asked || rs.key != tt.keys[i] {
				t.Errorf("%s: line %d keyed %q (asked %v), want %q", tt.name, i, rs.key, rs.asked, tt.keys[i])
			}
		}
		if tt.config == rules+proxied && !r.byAddr {
			t.Errorf("%s: the Caller of an address key is not cached", tt.name)
		}
		r.Close()
	}
}

// TestNoRates replays a log with and without the rate distributions,
// and wants the same report but for them: Config.NoRates skips their
// tallies and nothing else.
func TestNoRates(t *testing.T) {
	log, _ := generate(20_000, loggen.Config{Duration: time.Hour, Seed: 3})
	cfg := parseConfig(t, parallelRules)
	run := func(noRates bool) *Report {
		t.Helper()
		rep, err := Run(context.Background(), Options{Config: Config{Rules: cfg, NoRates: noRates}, Stdin: bytes.NewReader(log), Workers: 1})
		if err != nil {
			t.Fatalf("Run, NoRates %v: %v", noRates, err)
		}
		return rep
	}
	want, got := run(false), run(true)
	for i, g := range got.Rules {
		w := want.Rules[i]
		if limits := len(strings.Split(w.Policy, ", ")); len(w.Rates) != limits || len(g.Rates) != 0 {
			t.Errorf("rule %s: %d distributions, and %d with NoRates; want %d and 0", g.Rule, len(w.Rates), len(g.Rates), limits)
		}
		w.Rates = nil
		sameRule(t, "NoRates: rule "+g.Rule, g, w)
	}
}
