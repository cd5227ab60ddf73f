package server

// The attacks a service must hold against, each asserting the bound it
// keeps: no lifted ban, no extra allowance, bounded bans and logs.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testing/storefault"
	"github.com/sluicehq/sluice/server/rules"
)

// newServiceWith is newService with options of its own.
func newServiceWith(t testing.TB, text string, o Options) *Service {
	t.Helper()
	c, err := config.Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := NewService(context.Background(), c, o)
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestAttackKeyFloodKeepsBans floods a memory store of 1 MiB with 60,000
// distinct keys, far more than it holds, after an admin ban and a jail
// ban: both bans hold, on every API, and the store stays within its cap.
func TestAttackKeyFloodKeepsBans(t *testing.T) {
	s, _ := newService(t, serviceConfig+"store: {type: memory, memory: {max_bytes: 1048576}}\n")
	ctx := t.Context()
	if _, err := s.admin.Ban(ctx, ManualJail, banEntry("203.0.113.66"), time.Hour, "admin"); err != nil {
		t.Fatal(err)
	}
	const jailed = "203.0.113.67"
	for range 4 { // login allows 2 a minute; the jail bans after 2 denials
		auth(t, s.Handler(), "?rule=login", jailed)
	}
	e := s.Engine()
	for i := range 60_000 {
		if _, err := e.Check(ctx, rules.Request{Domain: "api", Descriptors: []rules.Descriptor{rules.Key(fmt.Sprint("flood-", i))}}); err != nil {
			t.Fatalf("check %d of the flood: %v", i, err)
		}
	}
	for _, ip := range []string{"203.0.113.66", jailed} {
		if w := auth(t, s.Handler(), "?rule=api", ip); w.Code != http.StatusForbidden || w.Header().Get("Retry-After") == "" {
			t.Errorf("forward-auth of %s after the flood = %d, want 403 banned", ip, w.Code)
		}
		for _, api := range guardAPIs {
			if o := api.ask(t, s, "api", ip); o.allowed || o.guard != "banned" {
				t.Errorf("%s: %s after the flood = %+v, want banned", api.name, ip, o)
			}
		}
	}
	if b := s.st.primary.(interface{ Bytes() int64 }).Bytes(); b > 1<<20 {
		t.Errorf("the store counts %d bytes, more than its cap of 1 MiB", b)
	}
}

// TestAttackFullStore fills a memory store of 256 KiB with 20,000
// actors over an hourly limit, twenty times what it holds, then checks
// what a full store must still do: decide every request (no 503, /readyz
// ready), admit new actors on the other rules, jail every offender, and
// never let a flooder through again within its hour; and what it must not
// do: jail a new actor for a denial it estimated from the flood.
func TestAttackFullStore(t *testing.T) {
	text := strings.Replace(serviceConfig, "rules:\n", "rules:\n  - name: hourly\n    limits: [\"1/h\"]\n", 1)
	text = strings.Replace(text, "  jails:\n", "  jails:\n    - {name: flood, rules: [hourly], max_failures: 1, find_time: 1h, ban_time: 1h}\n", 1)
	s, _ := newService(t, text+"store: {type: memory, memory: {max_bytes: 262144}}\n")
	h, e := s.Handler(), s.Engine()
	take := func(rule, key string) bool {
		res, err := e.Check(t.Context(), rules.Request{Domain: rule, Descriptors: []rules.Descriptor{rules.Key(key)}})
		if err != nil {
			t.Fatalf("%s %s on a full store: %v, want a decision", rule, key, err)
		}
		return res.Allowed
	}
	for i := range 20_000 {
		take("hourly", fmt.Sprint("flood-", i))
		take("hourly", fmt.Sprint("flood-", i))
	}
	for i := range 1000 {
		if take("hourly", fmt.Sprint("flood-", i)) {
			t.Fatalf("flooder %d let through again within its hour", i)
		}
	}
	estimated := 0
	for i := range 1000 {
		if !take("hourly", fmt.Sprint("fresh-", i)) {
			estimated++
		}
	}
	bans, err := s.admin.Bans(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bans {
		if strings.HasPrefix(b.Key, "fresh-") {
			t.Fatalf("new actor %s jailed for a denial estimated from the flood", b.Key)
		}
	}
	t.Logf("1000 new actors on the flooded rule: %d denied on an estimate, none jailed; %d bans", estimated, len(bans))
	if estimated == 0 {
		t.Error("no new actor on the flooded rule was denied: the ledger's cells were not exercised")
	}
	for _, rule := range []string{"api", "login"} {
		for i := range 100 {
			if !take(rule, fmt.Sprint("new-", i)) {
				t.Errorf("new actor %d on %s refused: a flood of another rule denies it", i, rule)
			}
		}
	}
	// An offender is let through twice at most, and jailed after two
	// denials. A full store may forget its state meanwhile (to make room
	// for its count of failures): it is then charged as the others and
	// denied on an estimate, which is no strike; still it is never let
	// through again.
	jailed := 0
	for i := range 300 {
		ip := fmt.Sprintf("100.65.%d.%d", i/250, i%250)
		let := 0
		for range 5 {
			if auth(t, h, "?rule=login", ip).Code == http.StatusOK {
				let++
			}
		}
		if let > 2 {
			t.Fatalf("offender %s let through %d times, want at most 2", ip, let)
		}
		if auth(t, h, "?rule=api", ip).Code == http.StatusForbidden {
			jailed++
		}
	}
	t.Logf("300 offenders on login: %d jailed, the others denied", jailed)
	if jailed < 270 {
		t.Errorf("%d of 300 offenders jailed on a full store, want 90%% or more", jailed)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if w.Code != http.StatusOK {
		t.Errorf("/readyz on a full store = %d, want 200: it still decides", w.Code)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(w.Body.String(), `sluice_decisions_total{op="take",result="estimated",rule="hourly"}`) {
		t.Errorf("/metrics does not count the estimated denials:\n%s", grepLines(w.Body.String(), "sluice_decisions_total"))
	}
	// A limit's first states in a shard may run the store over its cap
	// by a chunk of slots (see memory.Store): with 64 shards and four
	// limits, a tenth of so small a cap.
	if b := s.st.primary.(interface{ Bytes() int64 }).Bytes(); b > 262144*5/4 {
		t.Errorf("the store counts %d bytes, more than its cap and a quarter", b)
	}
}

// TestAttackBanFlood makes a jail ban 3,000 addresses of 20 networks
// through forward-auth, against a registry of 500 bans: it stays within
// its capacity, and every banned address is still refused.
func TestAttackBanFlood(t *testing.T) {
	s, _ := newService(t, strings.Replace(serviceConfig, "guard:\n", "guard:\n  max_bans: 500\n", 1))
	h := s.Handler()
	var banned []string
	for i := range 3000 {
		ip := fmt.Sprintf("100.64.%d.%d", i%20, i/20)
		for range 4 {
			auth(t, h, "?rule=login", ip)
		}
		banned = append(banned, ip)
		if st := s.st.registry.Bans().Stats(); st.Bans > 500 {
			t.Fatalf("after %d offenders the registry holds %d bans, more than its 500", i+1, st.Bans)
		}
	}
	for _, ip := range banned {
		if w := auth(t, h, "?rule=api", ip); w.Code != http.StatusForbidden {
			t.Fatalf("banned %s = %d, want 403: a ban was lost", ip, w.Code)
		}
	}
	st := s.st.registry.Bans().Stats()
	t.Logf("3000 offenders: %d bans held, %d coarsened, %d refused", st.Bans, st.Coarsened, st.Refused)
	if st.Refused != 0 {
		t.Errorf("%d address bans refused, want every one merged into a network", st.Refused)
	}
}

// TestAttackIPv6Rotation sends each request of an IPv6 client from
// another address of its /64, through forward-auth: they share one
// allowance, and the jail bans the /64, not one address of it.
func TestAttackIPv6Rotation(t *testing.T) {
	s, _ := newService(t, serviceConfig)
	h := s.Handler()
	allowed := 0
	for i := range 40 {
		if auth(t, h, "?rule=api", fmt.Sprintf("2001:db8:1:2::%x", i+1)).Code == http.StatusOK {
			allowed++
		}
	}
	if allowed != 3 { // api allows 3 a minute
		t.Errorf("40 requests from one /64 on 40 addresses: %d allowed, want 3", allowed)
	}
	for i := range 4 { // login: 2 a minute, banned after 2 denials
		auth(t, h, "?rule=login", fmt.Sprintf("2001:db8:5:6::%x", i+1))
	}
	if w := auth(t, h, "?rule=api", "2001:db8:5:6:ffff::1"); w.Code != http.StatusForbidden {
		t.Errorf("a new address of the jailed /64 = %d, want 403", w.Code)
	}
	bans, _ := s.admin.Bans(t.Context())
	if len(bans) != 1 || bans[0].Key != "2001:db8:5:6::/64" {
		t.Errorf("bans = %+v, want one of 2001:db8:5:6::/64", bans)
	}
	if w := auth(t, h, "?rule=api", "2001:db8:5:7::1"); w.Code != http.StatusOK {
		t.Errorf("another /64 = %d, want 200", w.Code)
	}
}

// TestAttackForgedClientAddress forges the client's address in every
// header a client could think of, on every API: a forged address never
// exempts (192.0.2.10 is allow-listed), never escapes a ban, and never
// buys a fresh allowance.
func TestAttackForgedClientAddress(t *testing.T) {
	s, _ := newService(t, serviceConfig)
	h := s.Handler()
	forge := func(r *http.Request, i int) {
		r.Header.Set("X-Forwarded-For", fmt.Sprintf("192.0.2.10, 10.9.%d.1", i))
		r.Header.Set("Forwarded", fmt.Sprintf("for=10.8.%d.1", i))
		r.Header.Set("X-Real-IP", fmt.Sprintf("10.7.%d.1", i))
	}
	// Forward-auth from a client that is no trusted proxy: its own
	// address keys it, whatever it claims.
	allowed := 0
	for i := range 10 {
		r := httptest.NewRequest(http.MethodGet, "/v1/auth", nil)
		r.RemoteAddr = "203.0.113.5:4000"
		forge(r, i)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Header().Get("X-Sluice-Exempt") != "" {
			t.Fatalf("forged request %d exempt by the allow list", i)
		}
		if w.Code == http.StatusOK {
			allowed++
		}
	}
	if allowed != 3 {
		t.Errorf("forward-auth, untrusted peer with forged headers: %d of 10 allowed, want 3", allowed)
	}
	// Behind the trusted proxy, forged hops left of the one it appended
	// count for nothing.
	allowed = 0
	for i := range 10 {
		if auth(t, h, "", fmt.Sprintf("192.0.2.10, 10.9.%d.1, 203.0.113.6", i), "X-Real-IP", "192.0.2.10").Code == http.StatusOK {
			allowed++
		}
	}
	if allowed != 3 {
		t.Errorf("forward-auth, forged hops behind the proxy: %d of 10 allowed, want 3", allowed)
	}
	// The other APIs key by the body: headers change nothing.
	for _, api := range guardAPIs {
		for i := range 5 {
			if o := api.ask(t, s, "api", "forged-"+api.name); o.guard == "allow-list" || o.allowed != (i < 3) {
				t.Errorf("%s: check %d = %+v, want the limits to decide", api.name, i, o)
			}
		}
	}
	// guard.Middleware without trusted proxies: the connection decides,
	// and the limits after it (one a minute) apply.
	var allow guard.List
	allow.AddPrefix(netip.MustParsePrefix("192.0.2.10/32"))
	lim, err := sluice.New(s.st.primary, sluice.Config{Limits: []sluice.Limit{sluice.PerMinute(1)}, Action: "forged"})
	if err != nil {
		t.Fatal(err)
	}
	limits, err := httplimit.New(httplimit.Config{Rules: []httplimit.Rule{{Limiter: lim}}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mw := guard.Middleware(guard.MiddlewareConfig{Allow: &allow, Logger: slog.New(slog.DiscardHandler)})(limits.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	var codes []int
	for i := range 3 {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "203.0.113.5:4000"
		forge(r, i)
		w := httptest.NewRecorder()
		mw.ServeHTTP(w, r)
		codes = append(codes, w.Code)
	}
	if fmt.Sprint(codes) != "[200 429 429]" {
		t.Errorf("guard.Middleware, forged headers from an untrusted peer: %v, want [200 429 429] (not exempt)", codes)
	}
}

// countingWriter counts the bytes written to it.
type countingWriter struct {
	mu sync.Mutex
	n  int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += len(p)
	return len(p), nil
}

// TestAttackLogFlood floods the service with requests that each used to
// write a log line — store failures, and offenders banned — and checks
// that the log stays within a few kilobytes, however many there are.
func TestAttackLogFlood(t *testing.T) {
	const n = 20_000
	var logs countingWriter
	log := slog.New(slog.NewTextHandler(&logs, nil))
	down := storefault.New(t)
	down.SetFail(true)
	s := newServiceWith(t, serviceConfig, Options{Store: down, Logger: log})
	for i := range n {
		if w := auth(t, s.Handler(), "", fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("request %d with the store down = %d, want 503", i, w.Code)
		}
	}
	failed := logs.n
	s2 := newServiceWith(t, serviceConfig, Options{Logger: log})
	for i := range n / 4 { // each offender: 2 admitted, 2 denied, banned
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)
		for range 4 {
			auth(t, s2.Handler(), "?rule=login", ip)
		}
	}
	banned := logs.n - failed
	t.Logf("log: %d bytes for %d store failures, %d bytes for %d bans", failed, n, banned, n/4)
	// Ten lines at once per message and rule, then one a second: the
	// test takes a few seconds.
	if failed > 8<<10 || banned > 8<<10 {
		t.Errorf("log of %d bytes for %d failures and %d for %d bans, want at most 8 KiB each", failed, n, banned, n/4)
	}
	if got := s2.st.registry.Bans().Stats().Bans; got != n/4 {
		t.Errorf("%d bans held, want %d: the log throttle must not change what is done", got, n/4)
	}
}

// TestAttackSilentHTTP opens connections to a service listener that say
// nothing, or send their headers a byte at a time (slowloris): the
// server drops each within ReadHeaderTimeout.
func TestAttackSilentHTTP(t *testing.T) {
	s, _ := newService(t, serviceConfig)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewHTTPServer(s.Handler(), slog.New(slog.DiscardHandler))
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	for _, tc := range []struct {
		name string
		send func(c net.Conn)
	}{
		{"silent", func(net.Conn) {}},
		{"slowloris", func(c net.Conn) {
			_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
			for {
				if _, err := io.WriteString(c, "X"); err != nil {
					return
				}
				time.Sleep(200 * time.Millisecond) // the attack is its slowness
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			go tc.send(c)
			start := time.Now()
			_ = c.SetReadDeadline(start.Add(ReadHeaderTimeout + 5*time.Second))
			_, err = io.Copy(io.Discard, c)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("connection still open after %v, want it closed within ReadHeaderTimeout (%v)", time.Since(start), ReadHeaderTimeout)
			}
		})
	}
}

// ipv6Config is serviceConfig with a rule of 10 a minute that
// forward-auth applies by default, keying IPv6 clients as extra says.
func ipv6Config(extra string) string {
	text := strings.Replace(serviceConfig, "rules:\n", "rules:\n  - name: ten\n    limits: [\"10/min\"]\n", 1)
	return strings.Replace(text, "  rule: api\n", "  rule: ten\n"+extra, 1)
}

// rotate asks forward-auth n times from each address of addrs and
// returns how many were allowed.
func rotate(t *testing.T, h http.Handler, n int, addrs func(i int) string, count int) int {
	t.Helper()
	allowed := 0
	for i := range count {
		for range n {
			if auth(t, h, "", addrs(i)).Code == http.StatusOK {
				allowed++
			}
		}
	}
	return allowed
}

// TestAttackIPv6Adaptive rotates, at 10 a minute, through 1,000
// addresses of one /64 and through 200 fresh /64s of one /48, with
// forward-auth's adaptive IPv6 keys and with the fixed /64. Each address
// asks once, 9 times (under the limit, as against the old adaptive keys,
// which widened only on denials) or until denied; the attacker's best is
// asserted: adaptive gives the /64 one allowance and the /48 at most
// five. Then the innocents, after the attack: a client of another /48
// keeps its own 10, and so does a /64 of the attacked /48 that held its
// grant before the attack; a /64 of the attacked /48 that arrives during
// it shares the /48's allowance (the stated price).
func TestAttackIPv6Adaptive(t *testing.T) {
	for _, tt := range []struct {
		name            string
		extra           string
		inSubnet, inOne int // the most allowed: 1,000 addresses of a /64, 200 /64s of a /48
	}{
		{"adaptive", "  ipv6_adaptive: true\n", 10, 50},
		{"fixed /64", "", 10, 2000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var s *Service
			const before = "2001:db8:1:ffff::1"
			bestSubnet, bestSite := 0, 0
			for _, n := range []int{1, 9, 11} {
				s, _ = newService(t, ipv6Config(tt.extra))
				if got := rotate(t, s.Handler(), 1, func(int) string { return before }, 1); got != 1 {
					t.Fatal("the neighbour before the attack was refused")
				}
				inSubnet := rotate(t, s.Handler(), n, func(i int) string { return fmt.Sprintf("2001:db8:9:9::%x", i+1) }, 1000)
				inSite := rotate(t, s.Handler(), n, func(i int) string { return fmt.Sprintf("2001:db8:1:%x::1", i+1) }, 200)
				t.Logf("%s, %d requests per address: 1,000 addresses of one /64: %d allowed; 200 /64s of one /48: %d allowed", tt.name, n, inSubnet, inSite)
				bestSubnet, bestSite = max(bestSubnet, inSubnet), max(bestSite, inSite)
			}
			if bestSubnet > tt.inSubnet || bestSite > tt.inOne {
				t.Errorf("at best %d allowed (one /64) and %d (one /48), want at most %d and %d", bestSubnet, bestSite, tt.inSubnet, tt.inOne)
			}
			h := s.Handler()
			for _, c := range []struct{ who, addr string }{
				{"a client of another /48", "2001:db8:2:1::1"},
				{"a client of the /48 next to the attacked one", "2001:db8:0:ffff::1"},
				{"the neighbour that held a grant before the attack", before},
			} {
				if got := rotate(t, h, 9, func(int) string { return c.addr }, 1); got != 9 {
					t.Errorf("%s (%s): %d of 9 allowed, want 9", c.who, c.addr, got)
				}
			}
			late := rotate(t, h, 10, func(int) string { return "2001:db8:1:fffe::1" }, 1)
			t.Logf("%s: a /64 of the attacked /48 arriving during the attack: %d of 10 allowed", tt.name, late)
			if tt.extra != "" && late != 0 {
				t.Errorf("the late neighbour got %d of 10: it should share the /48's spent allowance", late)
			}
		})
	}
	s, _ := newService(t, ipv6Config("  ipv6_adaptive: true\n"))
	auth(t, s.Handler(), "", "2001:db8:1:1::1")
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(w.Body.String(), "sluice_ipv6_subnet_grants_total 1") {
		t.Errorf("/metrics does not count the grant:\n%s", grepLines(w.Body.String(), "sluice_ipv6"))
	}
}

// TestAttackBanSteering is the ban registry's attack at its best: 400
// usernames banned through the HTTP API (which cannot merge), and 3,999
// offenders through forward-auth, 250 in each of 12 /24s and 250 /64s
// in each of 4 /48s (each /64 in a /56 of its own, so that merging them
// costs the most), into a registry of 100 bans, the usernames first (on
// e7e53da they filled it, and all 3,999 offenders went unbanned) or
// shuffled among the offenders; an allow-listed address and an
// allow-listed /64 sit among them.
// The attacker gets: every offender refused, the usernames limited to
// their share, no ban wider than /24 or /48. The innocents get: the
// allow-listed ones let through, addresses next to the attacked networks
// never refused, and within them a price the bans state (their
// collateral, through the admin API and /metrics) and that bounds the
// refusals measured.
func TestAttackBanSteering(t *testing.T) {
	for _, order := range []string{"usernames first", "shuffled"} {
		t.Run(order, func(t *testing.T) { banSteering(t, order) })
	}
}

// banSteering runs TestAttackBanSteering with the bans in order.
func banSteering(t *testing.T, order string) {
	text := strings.Replace(serviceConfig, "guard:\n  allow: [192.0.2.10, ", "guard:\n  max_bans: 100\n  allow: [198.18.3.77, \"2001:db8:2:3300::/64\", 192.0.2.10, ", 1)
	s, _ := newService(t, text)
	h := s.Handler()
	var seq []string // addresses, and "user:" and a number for a username
	for n := range 12 {
		for host := 1; host <= 250; host++ {
			if a := fmt.Sprintf("198.18.%d.%d", n, host); a != "198.18.3.77" {
				seq = append(seq, a)
			}
		}
	}
	for a := range 4 {
		for i := range 250 {
			seq = append(seq, fmt.Sprintf("2001:db8:%x:%x::1", a, i*0x101))
		}
	}
	offenders := len(seq)
	for i := range 400 {
		seq = append([]string{fmt.Sprint("user:", i)}, seq...)
	}
	if order == "shuffled" {
		rand.New(rand.NewPCG(3, 1)).Shuffle(len(seq), func(i, j int) { seq[i], seq[j] = seq[j], seq[i] })
	}
	for _, a := range seq {
		for range 4 { // login allows 2 a minute; the jail bans after 2 denials
			if u, ok := strings.CutPrefix(a, "user:"); ok {
				guardAPIs[0].ask(t, s, "login", "user-"+u)
			} else {
				auth(t, h, "?rule=login", a)
			}
		}
	}
	st := s.st.registry.Bans().Stats()
	t.Logf("%d offenders and 400 usernames: %+v", offenders, st)
	if st.Bans > 100 || st.Refused != 0 || st.Keys != 50 || st.RefusedKeys != 350 {
		t.Errorf("registry %+v; want at most 100 bans, no address refused, the usernames held to their share of 50", st)
	}
	// The attacker: every offender refused, at its address and, for
	// IPv6, anywhere in its /64.
	for _, a := range seq {
		if strings.HasPrefix(a, "user:") {
			continue
		}
		probe := a
		if strings.Contains(a, ":") {
			probe = strings.TrimSuffix(a, "::1") + ":ffff::7"
		}
		if w := auth(t, h, "?rule=api", probe); w.Code != http.StatusForbidden {
			t.Fatalf("offender %s (at %s) = %d, want 403 banned", a, probe, w.Code)
		}
	}
	bans, err := s.admin.Bans(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bans {
		if p, err := guard.ParsePrefix(b.Key); err == nil && (p.Addr().Is4() && p.Bits() < 24 || p.Addr().Is6() && p.Bits() < 48) {
			t.Errorf("ban %s is wider than the bound", b.Key)
		}
		if b.Collateral > 0 && !strings.Contains(b.CollateralUnit, "/64s") && !strings.Contains(b.CollateralUnit, "addresses") {
			t.Errorf("ban %s: collateral %d without its unit", b.Key, b.Collateral)
		}
	}
	// The innocents.
	for _, c := range []struct{ who, addr, exempt string }{
		{"the allow-listed address among the offenders", "198.18.3.77", "allow-list"},
		{"an address of the allow-listed /64 among the offenders", "2001:db8:2:3300::5", "allow-list"},
		{"the /24 next to an attacked one", "198.18.12.1", ""},
		{"the /24 before the attacked ones", "198.17.255.254", ""},
		{"the /48 next to an attacked one", "2001:db8:4::1", ""},
	} {
		if w := auth(t, h, "?rule=api", c.addr); w.Code != http.StatusOK || w.Header().Get("X-Sluice-Exempt") != c.exempt {
			t.Errorf("%s (%s) = %d %q, want 200 %q", c.who, c.addr, w.Code, w.Header().Get("X-Sluice-Exempt"), c.exempt)
		}
	}
	// Within the attacked /24s, the addresses that never offended pay the
	// collateral the bans state, no more.
	refused := 0
	for n := range 12 {
		for _, host := range []int{0, 251, 252, 253, 254, 255} {
			if auth(t, h, "?rule=api", fmt.Sprintf("198.18.%d.%d", n, host)).Code == http.StatusForbidden {
				refused++
			}
		}
	}
	t.Logf("72 bystanders in the attacked /24s: %d refused; the bans state %d addresses and %d /64s of collateral", refused, st.CollateralIPv4, st.CollateralIPv6)
	if int64(refused) > st.CollateralIPv4 {
		t.Errorf("%d bystanders refused, more than the %d addresses of collateral stated", refused, st.CollateralIPv4)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, m := range []string{`sluice_bans_collateral{family="ipv4"} ` + fmt.Sprint(st.CollateralIPv4), "sluice_bans_key_refused_total 350", "sluice_bans_refused_total 0"} {
		if !strings.Contains(w.Body.String(), m) {
			t.Errorf("/metrics lacks %q:\n%s", m, grepLines(w.Body.String(), "sluice_bans"))
		}
	}
}
