// Package registrytest is the conformance suite of guard.Registry
// implementations at capacity: what every ban registry (in memory,
// Redis, memcached, or another) must keep when an attacker fills it.
//
//   - Address bans always find room: bans of keys that are no address
//     (usernames) have their own share, and a flood of them never stops
//     a ban of an address, nor the reverse.
//   - Coarsening never goes wider than its bound (/24 and /48 by
//     default) and never covers an allow-listed address.
//   - No ban is lost: every offender stays banned, or its refusal is
//     counted.
//   - Every merged ban tells its collateral exactly, through List too.
//
// A registry's tests call Run with a constructor.
package registrytest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicehq/sluice/guard"
)

// Config describes the registry under test.
type Config struct {
	// New returns an empty registry with limits l whose coarsenings
	// spare the addresses of allow (see guard.BanSet.Spare), closed when
	// the test ends. With Shared, registries made by one test share
	// their bans (as processes of a fleet do), and those of other tests
	// do not.
	New func(t *testing.T, l guard.BanLimits, allow *guard.List) guard.Registry
	// Shared reports whether registries made by one test share bans.
	Shared bool
}

// Run runs the suite.
func Run(t *testing.T, c Config) {
	t.Run("Steering", func(t *testing.T) { testSteering(t, c) })
	t.Run("KeysAfterAddresses", func(t *testing.T) { testKeysAfterAddresses(t, c) })
	t.Run("Bound", func(t *testing.T) { testBound(t, c) })
	t.Run("AddressForms", func(t *testing.T) { testAddressForms(t, c) })
}

// The networks of the attack.
var (
	// allowed are on the allow list: inside an attacked /24, and a /64
	// beside an attacker's in an attacked /48.
	allowed = []string{"198.18.3.77", "2001:db8:2:3300::/64"}
	// innocents are next to the attacked networks, outside them: never
	// banned. (Within them, a merge bans some: the collateral each
	// merged ban tells.)
	innocents = []string{"198.18.12.1", "198.17.255.255", "198.19.0.1", "2001:db8:4::1", "2001:db7:ffff:ffff::1", "2001:db8:2:3300::9"}
)

// offenders returns the 4,000 offenders of the attack: 250 addresses in
// each of 12 /24s but the allow-listed one, and 250 /64s in each of 4
// /48s (as a jail bans IPv6 clients), each /64 in a /56 of its own, so
// that merging them costs the most.
func offenders() []string {
	var out []string
	for n := range 12 {
		for h := 1; h <= 250; h++ {
			if a := fmt.Sprintf("198.18.%d.%d", n, h); a != allowed[0] {
				out = append(out, a)
			}
		}
	}
	for a := range 4 {
		for i := range 250 {
			out = append(out, fmt.Sprintf("2001:db8:%x:%x::/64", a, i*0x101))
		}
	}
	return out
}

// put bans key in jail for an hour, as a jail does: unless a ban of the
// jail covers it already. It returns the error of the Put.
func put(ctx context.Context, r guard.Registry, jail, key string) error {
	_, err := putNew(ctx, r, jail, key)
	return err
}

// putNew is put that also reports whether it asked for a ban.
func putNew(ctx context.Context, r guard.Registry, jail, key string) (bool, error) {
	now := time.Now()
	if _, ok := r.Bans().Match(jail, key, now); ok {
		return false, nil
	}
	_, err := r.Put(ctx, guard.Ban{Jail: jail, Key: key, Reason: "test", Since: now, Until: now.Add(time.Hour), Offences: 1})
	return true, err
}

// testSteering is the attack of the issue: 4,000 offenders in 12 /24s
// and 4 /48s, plus 400 bans of usernames, into a registry of 100 bans,
// in the orders an attacker would pick. Every offender is banned, no ban
// is wider than /24 or /48 or covers an allow-listed address, the
// innocents next door are not banned, and each merged ban tells its
// collateral exactly, in every process.
func testSteering(t *testing.T, c Config) {
	offs := offenders()
	keys := make([]string, 400)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
	}
	for _, order := range []struct {
		name string
		seq  func() []string // "key:" marks a key ban
	}{
		{"usernames first, then each network in turn", func() []string {
			return append(prefixed(keys), offs...)
		}},
		{"round robin over the networks, usernames between", func() []string {
			var out []string
			for i := range 250 {
				for n := range 16 {
					if j := n*250 + i; j < len(offs) {
						out = append(out, offs[j])
					}
				}
				if i < len(keys) {
					out = append(out, "key:"+keys[i])
				}
			}
			return append(out, prefixed(keys[250:])...)
		}},
		{"shuffled", func() []string {
			out := append(prefixed(keys), offs...)
			rand.New(rand.NewPCG(1, 2)).Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
			return out
		}},
	} {
		t.Run(order.name, func(t *testing.T) {
			ctx := context.Background()
			allow := list(t, allowed)
			r := c.New(t, guard.BanLimits{Max: 100}, allow)
			keyBans := 0
			var banned []string // the offenders banned, not found covered already
			for _, k := range order.seq() {
				if u, ok := cutKey(k); ok {
					if err := put(ctx, r, "login", u); err == nil {
						keyBans++
					} else if !errors.Is(err, guard.ErrBansFull) {
						t.Fatalf("Put(%s): %v", u, err)
					}
					continue
				}
				switch asked, err := putNew(ctx, r, "abuse", k); {
				case err != nil:
					t.Fatalf("Put(%s): %v: an offender found no room", k, err)
				case asked:
					banned = append(banned, k)
				}
			}
			st := r.Bans().Stats()
			t.Logf("%+v; %d username bans held", st, keyBans)
			if st.Bans > 100 || st.Refused != 0 || keyBans != 50 || st.Keys != 50 {
				t.Errorf("Stats() = %+v with %d username bans; want at most 100 bans, none of an address refused, 50 usernames", st, keyBans)
			}
			checkBans(t, r, offs, banned, allow)
			if c.Shared {
				t.Run("another process", func(t *testing.T) {
					checkBans(t, c.New(t, guard.BanLimits{Max: 100}, allow), offs, banned, allow)
				})
			}
		})
	}
}

// checkBans checks what r holds after the attack: every offender
// banned, no innocent, no ban wider than its bound or over an allowed
// address, the collateral of each exact: what it covers beyond the
// offenders banned (not those a ban covered already when they came).
func checkBans(t *testing.T, r guard.Registry, offs, banned []string, allow *guard.List) {
	t.Helper()
	now := time.Now()
	for _, o := range offs {
		if _, ok := r.Bans().Match("", o, now); !ok {
			t.Fatalf("offender %s is not banned", o)
		}
	}
	for _, a := range append(innocents, allowed...) {
		if b, ok := r.Bans().Match("", a, now); ok {
			t.Errorf("innocent %s banned by %+v", a, b)
		}
	}
	bans, err := r.List(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bans {
		p, err := guard.ParsePrefix(b.Key)
		if err != nil {
			continue // a username
		}
		if p.Addr().Is4() && p.Bits() < guard.DefaultCoarsenIPv4 || p.Addr().Is6() && p.Bits() < guard.DefaultCoarsenIPv6 {
			t.Errorf("ban of %s is wider than the bound", b.Key)
		}
		if allow.Overlaps(p) {
			t.Errorf("ban of %s covers an allow-listed address", b.Key)
		}
		if want := collateral(p, banned); b.Collateral != want {
			t.Errorf("ban of %s: Collateral %d %s, want %d", b.Key, b.Collateral, b.CollateralUnit(), want)
		}
	}
}

// collateral counts what p covers beyond the offenders: addresses for
// IPv4, /64s for IPv6.
func collateral(p netip.Prefix, offs []string) int64 {
	unit := 32
	if p.Addr().Is6() {
		unit = 64
	}
	n := int64(1) << (unit - min(p.Bits(), unit))
	for _, o := range offs {
		if q, _ := guard.ParsePrefix(o); p.Overlaps(q) {
			n--
		}
	}
	return n
}

func prefixed(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = "key:" + k
	}
	return out
}

func cutKey(s string) (string, bool) {
	if len(s) > 4 && s[:4] == "key:" {
		return s[4:], true
	}
	return "", false
}

// testKeysAfterAddresses fills the addresses' share first, far beyond
// it: usernames still find their whole share.
func testKeysAfterAddresses(t *testing.T, c Config) {
	ctx := context.Background()
	r := c.New(t, guard.BanLimits{Max: 40, MaxKeys: 10}, nil)
	for i := range 2000 {
		if err := put(ctx, r, "abuse", fmt.Sprintf("198.18.%d.%d", i%8, i/8)); err != nil {
			t.Fatalf("offender %d: %v", i, err)
		}
	}
	for i := range 10 {
		if err := put(ctx, r, "login", fmt.Sprint("user-", i)); err != nil {
			t.Fatalf("username %d after the address flood: %v", i, err)
		}
	}
	if err := put(ctx, r, "login", "user-10"); !errors.Is(err, guard.ErrBansFull) {
		t.Errorf("username beyond the share: %v, want ErrBansFull", err)
	}
	if st := r.Bans().Stats(); st.Bans > 40 || st.Keys != 10 || st.Refused != 0 || st.RefusedKeys != 1 {
		t.Errorf("Stats() = %+v, want at most 40 bans, 10 of usernames, one refused", st)
	}
}

// testBound spreads offenders over more /24s of one /16 (or /48s of
// one /32) than the addresses' share holds: with the default bound none
// is merged wider than a /24 (a /48), the offenders that find no room
// are counted, never dropped silently; with a bound of /16 (/32) they
// all merge.
func testBound(t *testing.T, c Config) {
	v4 := func(i int) string { return fmt.Sprintf("100.64.%d.%d", i%200, 1+i/200) }
	v6 := func(i int) string { return fmt.Sprintf("2001:db8:%x:%x::/64", i%200, i/200) }
	for _, tt := range []struct {
		name    string
		limits  guard.BanLimits
		addr    func(i int) string // two in each of 200 networks of the bound
		bound   int
		refused bool
	}{
		{"default /24", guard.BanLimits{Max: 100}, v4, 24, true},
		{"bound /16", guard.BanLimits{Max: 100, CoarsenIPv4: 16}, v4, 16, false},
		{"default /48", guard.BanLimits{Max: 100}, v6, 48, true},
		{"bound /32", guard.BanLimits{Max: 100, CoarsenIPv6: 32}, v6, 32, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			r := c.New(t, tt.limits, nil)
			refused := 0
			var held []string
			for i := range 400 {
				a := tt.addr(i)
				switch err := put(ctx, r, "abuse", a); {
				case errors.Is(err, guard.ErrBansFull):
					refused++
				case err != nil:
					t.Fatal(err)
				default:
					held = append(held, a)
				}
			}
			st := r.Bans().Stats()
			t.Logf("%s: %d refused, %+v", tt.name, refused, st)
			if (refused > 0) != tt.refused || int64(refused) != st.Refused || st.Bans > 100 {
				t.Errorf("%d refused, %+v; want refusals %v, each counted, at most 100 bans", refused, st, tt.refused)
			}
			now := time.Now()
			for _, a := range held {
				if _, ok := r.Bans().Match("", a, now); !ok {
					t.Fatalf("ban of %s lost", a)
				}
			}
			bans, err := r.List(ctx, now)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bans {
				if p, err := guard.ParsePrefix(b.Key); err != nil || p.Bits() < tt.bound {
					t.Errorf("ban of %s is wider than the bound /%d", b.Key, tt.bound)
				}
			}
		})
	}
}

// testAddressForms bans addresses written in every form: each is banned
// under its canonical key and matched in every form (a zone names a link,
// not another host: it is dropped); leading zeros make a key that is no
// address, banned as written.
func testAddressForms(t *testing.T, c Config) {
	ctx := context.Background()
	r := c.New(t, guard.BanLimits{Max: 20}, nil)
	for _, tt := range []struct{ key, want, probe string }{
		{"::ffff:198.51.100.7", "198.51.100.7", "198.51.100.7"},
		{"2001:0DB8:0000::1", "2001:db8::1", "2001:db8::1"},
		{"2001:db8:1::/48", "2001:db8:1::/48", "2001:db8:1:ffff::1"},
		{"::ffff:198.51.101.0/120", "198.51.101.0/24", "198.51.101.9"},
		{"fe80::1%eth0", "fe80::1", "fe80::1%eth1"},
		{"010.001.002.003", "010.001.002.003", "010.001.002.003"},
	} {
		now := time.Now()
		b, err := r.Put(ctx, guard.Ban{Jail: "abuse", Key: tt.key, Since: now, Until: now.Add(time.Hour)})
		if err != nil || b.Key != tt.want {
			t.Errorf("Put(%q) = %q, %v; want %q", tt.key, b.Key, err, tt.want)
		}
		if _, ok := r.Bans().Match("", tt.probe, now); !ok {
			t.Errorf("%q is not banned by the ban of %q", tt.probe, tt.key)
		}
	}
	if _, ok := r.Bans().Match("", "10.1.2.3", time.Now()); ok {
		t.Error("010.001.002.003, a key, bans the address 10.1.2.3")
	}
}

// list returns the list of the entries, written as guard.ParseEntry
// reads them.
func list(t *testing.T, entries []string) *guard.List {
	t.Helper()
	l := &guard.List{}
	for _, s := range entries {
		e, err := guard.ParseEntry(s)
		if err != nil {
			t.Fatal(err)
		}
		l.Add(e)
	}
	return l
}
