package guard_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testing/testclock"
)

// TestMiddlewareKeys: with a Key, the lists' keys are checked too: a
// denied API key is refused from any address, an allowed one skips the
// limits, and a denied address stays denied whatever its key.
func TestMiddlewareKeys(t *testing.T) {
	c := testclock.New(testclock.T0)
	s := newStore(t)
	var allow, deny guard.List
	fill(t, &allow, "key:partner-key", "192.0.2.0/24")
	fill(t, &deny, "key:leaked-key", "198.51.100.0/24")
	lim, _ := sluice.New(s, sluice.Config{Limits: []sluice.Limit{sluice.PerHour(1)}, Clock: c.Now})
	limits, _ := httplimit.New(httplimit.Config{Rules: []httplimit.Rule{{Limiter: lim}}, Logger: slog.New(slog.DiscardHandler)})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	h := guard.Middleware(guard.MiddlewareConfig{Allow: &allow, Deny: &deny, Key: httplimit.Header("X-API-Key"), Logger: slog.New(slog.DiscardHandler)})(limits.Handler(ok))
	for i, tt := range []struct {
		remote, key string
		want        int
	}{
		{"203.0.113.1:1", "leaked-key", 403},
		{"203.0.113.2:1", "partner-key", 200},
		{"203.0.113.2:1", "partner-key", 200}, // exempt from the 1/h limit
		{"203.0.113.2:1", "", 200},
		{"203.0.113.2:1", "", 429}, // without the key, the limit applies
		{"198.51.100.1:1", "partner-key", 403},
		{"192.0.2.1:1", "leaked-key", 200}, // an allowed address is not checked further
		{"@", "leaked-key", 403},           // no address: the key still counts
		{"@", "partner-key", 200},
		{"@", "", 200},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tt.remote
		if tt.key != "" {
			r.Header.Set("X-API-Key", tt.key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.want {
			t.Errorf("request %d from %s with key %q: %d, want %d", i, tt.remote, tt.key, w.Code, tt.want)
		}
	}
	deny.RemoveKey("leaked-key") // edits take effect at once
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "203.0.113.9:1"
	r.Header.Set("X-API-Key", "leaked-key")
	w := httptest.NewRecorder()
	if h.ServeHTTP(w, r); w.Code != 200 {
		t.Errorf("after RemoveKey: %d, want 200", w.Code)
	}
}

// TestLoginLists: the lists judge a login as they judge every door, in
// the guard's one order: allowed addresses skip the limits and the jail,
// whatever the username; denied usernames (as typed, normalised) and
// addresses are refused before any limit, whatever the password; allowed
// keys change nothing for a username.
func TestLoginLists(t *testing.T) {
	ctx := context.Background()
	c := testclock.New(testclock.T0)
	s := newStore(t)
	var allow, deny guard.List
	j, _ := guard.NewJail(s, guard.JailConfig{MaxFailures: 3, Clock: c.Now})
	l := newLogin(t, s, c, guard.LoginConfig{Allow: &allow, Deny: &deny, Jail: j, PerIPUser: sluice.PerHour(3)})
	fill(t, &deny, "key:root", "key:mallory", "198.51.100.0/24")
	fill(t, &allow, "192.0.2.0/24", "key:bob") // key:bob is not consulted by Login
	office := netip.MustParseAddr("192.0.2.10")
	for _, tt := range []struct {
		ip      netip.Addr
		user    string
		allowed bool
		reason  string
	}{
		{ip(1), " ROOT", false, "denied by list"},
		{ip(1), "Mallory", false, "denied by list"},
		{netip.MustParseAddr("::ffff:198.51.100.9"), "alice", false, "denied by list"},
		{office, "root", true, "address on the allow list"}, // the address first, as on every door
		{office, "alice", true, "address on the allow list"},
		{ip(1), "alice", true, ""},
	} {
		a, err := l.Begin(ctx, guard.Try{IP: tt.ip, Username: tt.user})
		if err != nil {
			t.Fatal(err)
		}
		if a.Allowed != tt.allowed || a.Reason != tt.reason || a.Listed != (tt.reason != "") || (!a.Allowed && a.RetryAfter != 0) {
			t.Errorf("Begin(%v, %q) = allowed %v, reason %q, retry %v; want %v, %q, 0", tt.ip, tt.user, a.Allowed, a.Reason, a.RetryAfter, tt.allowed, tt.reason)
		}
	}
	// The office fails as often as it likes: nothing counts, no ban.
	for i := range 10 {
		a := attempt(t, l, guard.Try{IP: office, Username: "alice"}, false)
		if !a.Allowed {
			t.Fatalf("office attempt %d denied: %s", i, a.Reason)
		}
	}
	if _, banned, _ := j.Banned(ctx, office.String()); banned {
		t.Error("allow-listed address jailed")
	}
	// Bob is on the allow list's keys, which Login ignores: his
	// failures count as anyone's.
	for range 3 {
		attempt(t, l, guard.Try{IP: ip(2), Username: "bob"}, false)
	}
	if a := attempt(t, l, guard.Try{IP: ip(2), Username: "bob"}, false); a.Allowed {
		t.Error("allow-listed username exempt from the limits")
	}
	// An allowed success still makes the address known-good.
	attempt(t, l, guard.Try{IP: office, Username: "carol"}, true)
	allow.RemovePrefix(netip.MustParsePrefix("192.0.2.0/24"))
	if a, _ := l.Begin(ctx, guard.Try{IP: office, Username: "carol"}); !a.Allowed || !a.KnownGood || a.Reason != "" {
		t.Errorf("after leaving the allow list: %+v, want allowed through the limits, known-good", a)
	}
	c.Advance(time.Hour)
	deny.RemoveKey("root")
	if a, _ := l.Begin(ctx, guard.Try{IP: ip(3), Username: "root"}); !a.Allowed {
		t.Errorf("root after RemoveKey: %+v, want allowed", a)
	}
}
