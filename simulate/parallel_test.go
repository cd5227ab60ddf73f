package simulate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/simulate/accesslog"
	"github.com/sluicehq/sluice/simulate/loggen"
)

// parallelRules exercise what a split replay must keep in one worker:
// limits per client, a jail whose bans refuse the client under every
// rule, the deny list, shadow mode, and IPv6 clients keyed by /64 and
// jailed by it (loggen's rotator). Bans outlast the log: a jail
// lengthens each ban by a random fraction, so bans that end within the
// log could end at other times in two replays, sequential or not.
const parallelRules = `rules:
  - name: web
    limits: ["40/min fixed", "600/h"]
  - name: login
    limits: ["2/min fixed", "4/h log"]
  - name: search
    shadow: true
    limits: ["5/min"]
guard:
  deny: [198.51.100.0/24]
  jails:
    - {name: stuffing, rules: [login], max_failures: 3, find_time: 10m, ban_time: 12h}
    - {name: scrapers, rules: [web], max_failures: 200, find_time: 5m, ban_time: 12h}
`

// TestParallelMatchesSequential replays the same log on one worker and
// on several, and wants the same report: every count, the first and
// last denials, the series and the rate distributions exactly; the
// distinct-key estimates within their error (their seeds differ); the
// heavy hitters' exact counts equal.
func TestParallelMatchesSequential(t *testing.T) {
	log, _ := generate(80_000, loggen.Config{Duration: 2 * time.Hour, Seed: 7})
	cfg := parseConfig(t, parallelRules)
	routes := []Route{{Rule: "web"}, {Rule: "login", PathPrefix: "/login"}, {Rule: "search", PathPrefix: "/search"}}
	run := func(workers int) *Report {
		t.Helper()
		rep, err := Run(context.Background(), Options{Config: Config{Rules: cfg, Routes: routes}, Stdin: bytes.NewReader(log), Workers: workers})
		if err != nil {
			t.Fatalf("Run with %d workers: %v", workers, err)
		}
		return rep
	}
	want := run(1)
	var bans, denied int64
	for _, rr := range want.Rules {
		bans, denied = bans+rr.Bans, denied+rr.WouldDeny
	}
	if bans == 0 || denied == 0 {
		t.Fatalf("sequential replay: %d denials, %d bans; the traffic does not exercise the rules", denied, bans)
	}
	for _, workers := range []int{2, 3, 8} {
		got := run(workers)
		if got.Requests != want.Requests || got.CheckErrors != 0 {
			t.Fatalf("%d workers: %d requests, %d failed checks; want %d, 0", workers, got.Requests, got.CheckErrors, want.Requests)
		}
		for i, g := range got.Rules {
			sameRule(t, fmt.Sprintf("%d workers: rule %s", workers, g.Rule), g, want.Rules[i])
		}
	}
}

// sameRule compares a rule's report of a split replay with that of a
// sequential one.
func sameRule(t *testing.T, name string, g, w RuleReport) {
	t.Helper()
	counts := func(r RuleReport) [7]int64 {
		return [7]int64{r.Requests, r.WouldDeny, r.Shadowed, r.Banned, r.Refused, r.Exempt, r.Bans}
	}
	if counts(g) != counts(w) {
		t.Errorf("%s: requests, denied, shadowed, banned, refused, exempt, bans = %v, want %v", name, counts(g), counts(w))
	}
	if !reflect.DeepEqual(g.FirstDenial, w.FirstDenial) || !reflect.DeepEqual(g.LastDenial, w.LastDenial) {
		t.Errorf("%s: denials from %v to %v, want %v to %v", name, g.FirstDenial, g.LastDenial, w.FirstDenial, w.LastDenial)
	}
	if !reflect.DeepEqual(g.Series, w.Series) {
		t.Errorf("%s: series differ:\n got %+v\nwant %+v", name, g.Series, w.Series)
	}
	if !reflect.DeepEqual(g.Rates, w.Rates) {
		t.Errorf("%s: rates = %+v, want %+v", name, g.Rates, w.Rates)
	}
	// HyperLogLogs of different seeds: 5% (three standard errors), and
	// for a few keys the registers two or three of them may share.
	if g.DeniedKeys < w.DeniedKeys*95/100-3 || g.DeniedKeys > w.DeniedKeys*105/100+3 {
		t.Errorf("%s: denied keys %d, want %d within 5%% + 3", name, g.DeniedKeys, w.DeniedKeys)
	}
	exact := map[string]int64{}
	for _, k := range w.TopDenied {
		if k.Err == 0 {
			exact[k.Key] = k.Denied
		}
	}
	for _, k := range g.TopDenied {
		if n, ok := exact[k.Key]; ok && k.Err == 0 && k.Denied != n {
			t.Errorf("%s: key %s denied %d, sequentially %d", name, k.Key, k.Denied, n)
		}
	}
}

// TestWorkers checks how many workers a replay takes, and that it
// refuses to split one that would then decide differently.
func TestWorkers(t *testing.T) {
	byIP := parseConfig(t, "rules:\n  - name: web\n    limits: [\"1/s\"]\n")
	byUser := parseConfig(t, "rules:\n  - name: web\n    limits: [\"1/s\"]\nforward_auth:\n  key: [\"header:X-Forwarded-User\"]\n")
	byIPAndPath := parseConfig(t, "rules:\n  - name: web\n    limits: [\"1/s\"]\nforward_auth:\n  key: [ip, path]\n")
	tests := []struct {
		name    string
		o       Options
		want    int
		refused bool
	}{
		{"default, keyed by ip", Options{Config: Config{Rules: byIP}}, -1, false},
		{"asked for 3", Options{Config: Config{Rules: byIP}, Workers: 3}, 3, false},
		{"ip and path", Options{Config: Config{Rules: byIPAndPath}, Workers: 2}, 2, false},
		{"default, keyed by user", Options{Config: Config{Rules: byUser}}, 1, false},
		{"keyed by user, asked for 2", Options{Config: Config{Rules: byUser}, Workers: 2}, 0, true},
		{"default, compare", Options{Config: Config{Rules: byIP}, Compare: byIP}, 1, false},
		{"compare, asked for 2", Options{Config: Config{Rules: byIP}, Compare: byIP, Workers: 2}, 0, true},
		{"asked for 1", Options{Config: Config{Rules: byUser}, Workers: 1}, 1, false},
		{"no rules, asked for 2", Options{Workers: 2}, 1, false},
	}
	for _, tt := range tests {
		n, err := workers(tt.o)
		switch {
		case tt.refused && !errors.Is(err, ErrNotParallel):
			t.Errorf("%s: workers = %d, %v; want ErrNotParallel", tt.name, n, err)
		case !tt.refused && err != nil:
			t.Errorf("%s: workers: %v", tt.name, err)
		case tt.want > 0 && n != tt.want, tt.want < 0 && n < 1:
			t.Errorf("%s: workers = %d, want %d", tt.name, n, tt.want)
		}
	}
	if _, err := Run(context.Background(), Options{Workers: 2, Stdin: strings.NewReader("")}); err == nil || !strings.Contains(err.Error(), "no rules") {
		t.Errorf("Run without rules on 2 workers = %v, want an error saying there are no rules", err)
	}
}

// TestPartitioner checks that the requests of one client network go to
// one worker however they reach the replay: directly, behind the
// trusted proxy that logged them, with forged hops on the left; and
// that an IPv6 client rotating through its /64 stays on one worker.
func TestPartitioner(t *testing.T) {
	cfg := parseConfig(t, "rules:\n  - name: web\n    limits: [\"1/s\"]\nforward_auth:\n  trusted_proxies: [10.0.0.0/8]\n")
	p := newPartitioner(cfg.ForwardAuth, "10.0.0.1:1", 64)
	entry := func(addr, fwd string) *accesslog.Entry {
		return &accesslog.Entry{Addr: []byte(addr), Forwarded: []byte(fwd)}
	}
	tests := []struct {
		name string
		a, b *accesslog.Entry
	}{
		{"direct and behind a trusted proxy", entry("203.0.113.7", ""), entry("10.1.2.3", "203.0.113.7")},
		{"forged hops", entry("203.0.113.7", "1.2.3.4, 5.6.7.8"), entry("203.0.113.7", "")},
		{"trusted hops", entry("10.9.9.9", "203.0.113.7, 10.0.0.5"), entry("203.0.113.7", "")},
		{"IPv6 /64", entry("2001:db8:1:2::1", ""), entry("2001:db8:1:2:ffff:1234::9", "")},
		{"IPv6 /48 (adaptive)", entry("2001:db8:1:2::1", ""), entry("2001:db8:1:ff00::1", "")},
		{"unknown clients", entry("junk", ""), entry("10.0.0.2", "unknown")},
	}
	for _, tt := range tests {
		for range 2 { // the second time from the cache
			wa, addr := p.worker(tt.a)
			inSlot := p.cache[addr.slot].addr == addr.s
			if wb, _ := p.worker(tt.b); wa != wb || addr.s != string(tt.a.Addr) || !inSlot {
				t.Errorf("%s: workers %d and %d, address %q in slot %d; want one, %q in its slot", tt.name, wa, wb, addr.s, addr.slot, tt.a.Addr)
			}
		}
	}
	if w, _ := p.worker(entry("junk", "")); w != 0 {
		t.Errorf("worker of an unknown client = %d, want 0 (they share the key \"unknown\")", w)
	}
	seen := map[int]bool{}
	for i := range 256 {
		w, _ := p.worker(entry(fmt.Sprintf("192.0.2.%d", i), ""))
		seen[w] = true
	}
	if len(seen) < 32 {
		t.Errorf("256 addresses went to %d of 64 workers: want them spread", len(seen))
	}
}

// TestParcelBounds checks that a parcel copies what deciding reads, and
// takes a line longer than its arena alone.
func TestParcelBounds(t *testing.T) {
	pc := &parcel{entries: make([]accesslog.Entry, 0, 4), arena: make([]byte, 0, 64)}
	n := &needs{}
	a := clientAddr{s: "203.0.113.7"}
	src := accesslog.Entry{Time: 5, Addr: []byte("203.0.113.7"), URI: []byte("/a"), Line: 9}
	for i := range 4 {
		if !pc.add(&src, a, true, n) {
			t.Fatalf("entry %d refused by a parcel of 4", i)
		}
	}
	if pc.add(&src, a, true, n) {
		t.Fatal("a full parcel took a fifth entry")
	}
	src.Addr[0] = '9' // the copies do not share the source's bytes
	if e := pc.entries[3]; string(e.Addr) != "203.0.113.7" || string(e.URI) != "/a" || e.Time != 5 || e.Line != 9 {
		t.Errorf("copied entry = %+v", e)
	}
	long := accesslog.Entry{Addr: []byte("203.0.113.7"), URI: []byte("/" + strings.Repeat("x", 1000))}
	empty := &parcel{entries: make([]accesslog.Entry, 0, 4), arena: make([]byte, 0, 64)}
	if !empty.add(&long, a, true, n) || len(empty.entries[0].URI) != 1001 {
		t.Error("an empty parcel refused a long line")
	}
	if empty.add(&src, a, true, n) {
		t.Error("a parcel whose arena a long line filled took more")
	}
}
