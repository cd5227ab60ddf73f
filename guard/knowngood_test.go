package guard_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/testing/testclock"
)

// knownSet returns which of addrs Begin finds known-good for user.
func knownSet(t *testing.T, l *guard.Login, user string, addrs map[string]netip.Addr) string {
	t.Helper()
	var out []string
	for name, a := range addrs {
		at, err := l.Begin(context.Background(), guard.Try{IP: a, Username: user})
		if err != nil {
			t.Fatal(err)
		}
		if at.KnownGood {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return strings.Join(out, "")
}

// TestKnownGoodCap: an account keeps its last KnownGoodAddrs addresses,
// least recently used out first, shared by every Login on the store.
func TestKnownGoodCap(t *testing.T) {
	addrs := map[string]netip.Addr{
		"A": netip.MustParseAddr("203.0.113.1"), "B": netip.MustParseAddr("2001:db8::b"),
		"C": netip.MustParseAddr("::ffff:203.0.113.3"), "D": netip.MustParseAddr("203.0.113.4"),
	}
	lenient := guard.LoginConfig{PerIPUser: sluice.PerHour(1000), PerIP: sluice.PerHour(1000)}
	for _, tt := range []struct {
		name  string
		cap   int
		steps []string // the address of each success, one a minute
		want  []string // the known set after each
	}{
		{"cap 2", 2,
			[]string{"A", "B", "C", "B", "D", "A", "A"},
			[]string{"A", "AB", "BC", "BC", "BD", "AD", "AD"}},
		{"cap 1", 1,
			[]string{"A", "A", "B", "A"},
			[]string{"A", "A", "B", "A"}},
		{"default cap 5", 0,
			[]string{"A", "B", "C", "D"},
			[]string{"A", "AB", "ABC", "ABCD"}},
		{"no cap", -1,
			[]string{"A", "B", "C", "D", "A"},
			[]string{"A", "AB", "ABC", "ABCD", "ABCD"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := testclock.New(testclock.T0)
			s := newStore(t)
			cfg := lenient
			cfg.KnownGoodAddrs = tt.cap
			// Two processes on one store: successes through either count.
			ls := []*guard.Login{newLogin(t, s, c, cfg), newLogin(t, s, c, cfg)}
			for i, step := range tt.steps {
				c.Advance(time.Minute)
				attempt(t, ls[i%2], guard.Try{IP: addrs[step], Username: "alice"}, true)
				if got := knownSet(t, ls[(i+1)%2], "alice", addrs); got != tt.want[i] {
					t.Errorf("after successes %v: known-good %q, want %q", tt.steps[:i+1], got, tt.want[i])
				}
			}
			if got := knownSet(t, ls[0], "bob", addrs); got != "" {
				t.Errorf("another account: known-good %q, want none", got)
			}
			c.Advance(31 * 24 * time.Hour) // KnownGoodFor is 30 days
			if got := knownSet(t, ls[0], "alice", addrs); got != "" {
				t.Errorf("after 31 days: known-good %q, want none", got)
			}
			c.Advance(time.Minute)
			attempt(t, ls[0], guard.Try{IP: addrs["C"], Username: "alice"}, true)
			if got := knownSet(t, ls[1], "alice", addrs); got != "C" {
				t.Errorf("a success after all lapsed: known-good %q, want C", got)
			}
		})
	}
}

// TestKnownGoodCapUnderAttack: while the account is under attack, its
// known-good addresses get through and one that was evicted does not.
func TestKnownGoodCapUnderAttack(t *testing.T) {
	c := testclock.New(testclock.T0)
	l := newLogin(t, newStore(t), c, guard.LoginConfig{PerUser: sluice.PerHour(5), KnownGoodAddrs: 2})
	old, home, phone := netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("198.51.100.3")
	for _, a := range []netip.Addr{old, home, phone} {
		c.Advance(time.Hour)
		attempt(t, l, guard.Try{IP: a, Username: "alice"}, true)
	}
	for i := range 5 { // a botnet uses up the account's failures
		attempt(t, l, guard.Try{IP: ip(100 + i), Username: "alice"}, false)
	}
	for _, tt := range []struct {
		addr netip.Addr
		want bool
	}{{home, true}, {phone, true}, {old, false}} {
		if a := attempt(t, l, guard.Try{IP: tt.addr, Username: "alice"}, true); a.Allowed != tt.want {
			t.Errorf("%v during the attack: allowed %v, want %v (%s)", tt.addr, a.Allowed, tt.want, a.Reason)
		}
	}
}
