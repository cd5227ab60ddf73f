package guard_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testing/testclock"
)

// TestList checks a list's networks and keys, on a list of a few
// networks (tried one by one) and on one of many (looked up by length).
func TestList(t *testing.T) {
	var many guard.List
	for i := range 20 { // networks that hold none of the addresses below
		fill(t, &many, fmt.Sprintf("10.%d.0.0/16", i), fmt.Sprintf("2001:db8:ff%02x::/48", i))
	}
	fill(t, &many, "203.0.113.0/24", "2001:db8:1::/48", "198.51.100.7", "::ffff:192.0.2.0/120", "key:alice")
	for _, tt := range listCases {
		if got := many.Contains(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("a list of %d networks: Contains(%s) = %v, want %v", len(many.Prefixes()), tt.addr, got, tt.want)
		}
	}
	var l guard.List
	fill(t, &l, "203.0.113.0/24", "2001:db8:1::/48", "198.51.100.7", "::ffff:192.0.2.0/120", "key:alice")
	for _, tt := range listCases {
		if got := l.Contains(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("Contains(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
	if !l.ContainsKey("alice") || l.ContainsKey("bob") {
		t.Errorf("ContainsKey(alice, bob) = %v, %v; want true, false", l.ContainsKey("alice"), l.ContainsKey("bob"))
	}
	l.RemovePrefix(netip.MustParsePrefix("203.0.113.0/24"))
	l.RemoveKey("alice")
	if l.Contains(netip.MustParseAddr("203.0.113.1")) || l.ContainsKey("alice") {
		t.Error("entries still there after Remove")
	}
	if got := len(l.Prefixes()); got != 3 {
		t.Errorf("len(Prefixes()) = %d, want 3: %v", got, l.Prefixes())
	}
	if (&guard.List{}).Contains(netip.MustParseAddr("1.2.3.4")) {
		t.Error("zero List contains an address")
	}
}

// listCases are addresses TestList's lists hold or not.
var listCases = []struct {
	addr string
	want bool
}{
	{"203.0.113.1", true}, {"203.0.114.1", false}, {"198.51.100.7", true}, {"198.51.100.8", false},
	{"2001:db8:1:ffff::1", true}, {"2001:db8:2::1", false}, {"::ffff:203.0.113.9", true},
	{"192.0.2.55", true}, {"fe80::1%eth0", false}, {"10.20.0.1", false},
}

// TestListConcurrent edits a list while others read it (run with -race).
func TestListConcurrent(t *testing.T) {
	var l guard.List
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(g), byte(i), 0}), 24)
				l.AddPrefix(p)
				if !l.Contains(netip.AddrFrom4([4]byte{10, byte(g), byte(i), 9})) {
					t.Errorf("added %v, not contained", p)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := len(l.Prefixes()); got != 800 {
		t.Errorf("len(Prefixes()) = %d, want 800", got)
	}
}

func TestJail(t *testing.T) {
	ctx := context.Background()
	c := testclock.New(testclock.T0)
	s := newStore(t)
	var told []guard.Ban
	// Two processes share the store and the registry of bans (a fleet
	// shares a redisbans.Registry).
	reg := &guard.MemoryRegistry{}
	cfg := guard.JailConfig{Name: "ssh", MaxFailures: 3, FindTime: time.Minute, BanTime: time.Minute, MaxBanTime: 10 * time.Minute, Jitter: -1, Clock: c.Now,
		OnBan: func(b guard.Ban) { told = append(told, b) }, Registry: reg}
	j, err := guard.NewJail(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Another process: same store, same name, same registry.
	other, err := guard.NewJail(s, guard.JailConfig{Name: "ssh", MaxFailures: 3, FindTime: time.Minute, BanTime: time.Minute, MaxBanTime: 10 * time.Minute, Clock: c.Now, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	const ip = "203.0.113.7"
	fail := func(wantBan bool) guard.Ban {
		t.Helper()
		b, banned, err := j.Fail(ctx, ip, "failed logins")
		if err != nil || banned != wantBan {
			t.Fatalf("Fail() = %v, %v, want banned %v", banned, err, wantBan)
		}
		return b
	}
	// Failures spread over more than FindTime do not ban.
	fail(false)
	fail(false)
	c.Advance(61 * time.Second)
	fail(false)
	fail(false)
	b := fail(true)
	if b.Offences != 1 || b.Until.Sub(b.Since) != time.Minute || !strings.Contains(b.Reason, "3 failed logins within 1m0s") {
		t.Errorf("first ban = %+v, want 1 offence, 1m, reason", b)
	}
	if left, banned, _ := other.Banned(ctx, ip); !banned || left != time.Minute {
		t.Errorf("other process: Banned() = %v, %v, want true, 1m", left, banned)
	}
	c.Advance(59 * time.Second)
	if _, banned, _ := j.Banned(ctx, ip); !banned {
		t.Error("ban lapsed early")
	}
	c.Advance(time.Second)
	if _, banned, _ := j.Banned(ctx, ip); banned {
		t.Error("ban did not lapse")
	}
	// Repeat offences: 2m, 4m, 8m, then capped at 10m.
	for i, want := range []time.Duration{2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute} {
		fail(false)
		fail(false)
		b := fail(true)
		if got := b.Until.Sub(b.Since); got != want || b.Offences != i+2 {
			t.Errorf("offence %d: ban %v with %d offences, want %v with %d", i+2, got, b.Offences, want, i+2)
		}
		if i < 3 {
			c.Advance(want)
		}
	}
	bans, err := j.Bans(ctx)
	if err != nil || len(bans) != 1 || bans[0].Key != ip {
		t.Fatalf("Bans() = %v, %v, want the ban of %s", bans, err, ip)
	}
	if len(told) != 5 {
		t.Errorf("OnBan called %d times, want 5", len(told))
	}
	if err := other.Lift(ctx, ip); err != nil {
		t.Fatal(err)
	}
	if _, banned, _ := j.Banned(ctx, ip); banned {
		t.Error("lifted in another process, still banned here")
	}
	// By hand, and Pardon forgets offences.
	if b, err := j.Ban(ctx, "198.51.100.0/24", time.Hour, "spam wave"); err != nil || b.Until.Sub(b.Since) != time.Hour {
		t.Errorf("Ban() = %+v, %v", b, err)
	}
	if err := j.Pardon(ctx, ip); err != nil {
		t.Fatal(err)
	}
	fail(false)
	fail(false)
	if b := fail(true); b.Offences != 1 {
		t.Errorf("after Pardon, offences = %d, want 1", b.Offences)
	}
}

func TestJailJitter(t *testing.T) {
	ctx := context.Background()
	c := testclock.New(testclock.T0)
	j, err := guard.NewJail(newStore(t), guard.JailConfig{MaxFailures: 1, BanTime: time.Hour, Jitter: 0.5, Clock: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[time.Duration]bool{}
	for i := range 20 {
		b, _, err := j.Fail(ctx, "10.0.0."+string(rune('a'+i)), "")
		if err != nil {
			t.Fatal(err)
		}
		d := b.Until.Sub(b.Since)
		if d < time.Hour || d > 90*time.Minute {
			t.Errorf("jittered ban %v, want within [1h, 1h30m]", d)
		}
		distinct[d] = true
	}
	if len(distinct) < 10 {
		t.Errorf("%d distinct ban lengths among 20, want jitter to spread them", len(distinct))
	}
}

func TestNewJailRejects(t *testing.T) {
	for _, c := range []guard.JailConfig{
		{Growth: 0.5},
		{BanTime: time.Hour, MaxBanTime: time.Minute},
		{MaxFailures: 200_000},
	} {
		if _, err := guard.NewJail(newStore(t), c); err == nil {
			t.Errorf("NewJail(%+v) = nil error, want one", c)
		}
	}
}

func TestMiddleware(t *testing.T) {
	ctx := context.Background()
	c := testclock.New(testclock.T0)
	s := newStore(t)
	j, _ := guard.NewJail(s, guard.JailConfig{Clock: c.Now})
	var allow, deny guard.List
	fill(t, &allow, "192.0.2.0/24")
	fill(t, &deny, "198.51.100.0/24")
	if _, err := j.Ban(ctx, "203.0.113.66", 90*time.Second, "test"); err != nil {
		t.Fatal(err)
	}
	// The limit after the guard allows one request per address an hour:
	// allow-listed addresses are exempt from it.
	lim, _ := sluice.New(s, sluice.Config{Limits: []sluice.Limit{sluice.PerHour(1)}, Clock: c.Now})
	limits, _ := httplimit.New(httplimit.Config{Rules: []httplimit.Rule{{Limiter: lim}}, Logger: slog.New(slog.DiscardHandler)})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	h := guard.Middleware(guard.MiddlewareConfig{Allow: &allow, Deny: &deny, Jails: []*guard.Jail{j}, Logger: slog.New(slog.DiscardHandler)})(limits.Handler(ok))
	for _, tt := range []struct {
		remote     string
		want       int
		retryAfter string
	}{
		{"192.0.2.5:1", 200, ""},
		{"192.0.2.5:1", 200, ""},
		{"192.0.2.5:1", 200, ""},
		{"198.51.100.5:1", 403, ""},
		{"203.0.113.66:1", 403, "90"},
		{"203.0.113.67:1", 200, ""},
		{"203.0.113.67:1", 429, "3600"},
		{"@", 200, ""},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tt.remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.want || w.Header().Get("Retry-After") != tt.retryAfter {
			t.Errorf("%s: %d Retry-After %q, want %d %q", tt.remote, w.Code, w.Header().Get("Retry-After"), tt.want, tt.retryAfter)
		}
	}
}

// TestActorForms: an actor typed by NewActor is judged as the address it
// names in every textual form a client may give (IPv4-mapped, with a
// zone, upper case), or as an opaque key when it names none (leading
// zeros, which netip refuses as ambiguous: such a key counts under its
// own name, as the limits count it), with the client's address beside it.
func TestActorForms(t *testing.T) {
	j, err := guard.NewJail(newStore(t), guard.JailConfig{Name: "manual"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ban := range []string{"203.0.113.7", "2001:db8:1::/48", "fe80::/64"} {
		if _, err := j.Ban(context.Background(), ban, time.Hour, "test"); err != nil {
			t.Fatal(err)
		}
	}
	g := guard.NewGuard(guard.GuardConfig{Jails: []*guard.Jail{j}})
	for _, tt := range []struct {
		addr, key string
		want      guard.Action
	}{
		{"", "203.0.113.7", guard.Banned},
		{"", "::ffff:203.0.113.7", guard.Banned},
		{"", "2001:DB8:1:2::9", guard.Banned},
		{"", "2001:db8:1:2::/64", guard.Banned},
		{"", "fe80::1%eth0", guard.Banned},
		{"", "203.000.113.007", guard.Pass}, // no address: a key of its own
		{"::ffff:203.0.113.7", "alice", guard.Banned},
		{"198.51.100.1", "203.0.113.7", guard.Banned},
		{"198.51.100.1", "alice", guard.Pass},
	} {
		addr, _ := netip.ParseAddr(tt.addr)
		if got := g.Check(guard.NewActor(addr, tt.key)).Action; got != tt.want {
			t.Errorf("Check(NewActor(%q, %q)) = %v, want %v", tt.addr, tt.key, got, tt.want)
		}
		if got := g.Check(guard.Actor{Addr: addr, Key: tt.key}).Action; addr.IsValid() && got != tt.want {
			t.Errorf("Check(Actor{%q, %q}), untyped = %v, want %v", tt.addr, tt.key, got, tt.want)
		}
	}
}
