package guard_test

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ban(jail, key string, d time.Duration) guard.Ban {
	return guard.Ban{Jail: jail, Key: key, Since: t0, Until: t0.Add(d), Reason: "test"}
}

// TestBanSetMatch checks that a ban of a network covers every address
// and narrower network in it, in every form an address takes, and that
// other keys match only themselves.
func TestBanSetMatch(t *testing.T) {
	var s guard.BanSet
	for _, b := range []guard.Ban{
		ban("manual", "198.51.100.0/24", time.Hour),
		ban("manual", "2001:db8:1::/48", time.Hour),
		ban("login", "::ffff:192.0.2.7", 2*time.Hour),
		ban("login", "alice", 30*time.Minute),
		ban("login", "203.0.113.0/24", time.Minute),
		ban("manual", "203.0.113.0/25", time.Hour),
	} {
		if _, err := s.Put(b, t0); err != nil {
			t.Fatalf("Put(%+v): %v", b, err)
		}
	}
	for _, tt := range []struct {
		jail, key string
		want      string // key of the ban found, "" for none
	}{
		{"", "198.51.100.9", "198.51.100.0/24"},
		{"", "::ffff:198.51.100.9", "198.51.100.0/24"},
		{"", "198.51.100.0/28", "198.51.100.0/24"},
		{"", "198.51.101.1", ""},
		{"", "198.51.0.0/16", ""}, // wider than the ban
		{"", "2001:db8:1:2::1", "2001:db8:1::/48"},
		{"", "2001:db8:1:2::/64", "2001:db8:1::/48"},
		{"", "2001:db8:2::1", ""},
		{"", "192.0.2.7", "192.0.2.7"},
		{"", "192.0.2.7/32", "192.0.2.7"},
		{"", "alice", "alice"},
		{"", "alicE", ""},
		{"", "key:alice", ""},
		{"manual", "alice", ""},
		{"login", "203.0.113.5", "203.0.113.0/24"},
		{"", "203.0.113.5", "203.0.113.0/25"}, // the longer of two
		{"", "fe80::1%eth0", ""},
	} {
		b, ok := s.Match(tt.jail, tt.key, t0)
		if got := map[bool]string{true: b.Key}[ok]; got != tt.want {
			t.Errorf("Match(%q, %q) = %q, %v; want %q", tt.jail, tt.key, b.Key, ok, tt.want)
		}
	}
	if b, ok := s.MatchAddr("", netip.MustParseAddr("::ffff:198.51.100.200"), t0); !ok || b.Key != "198.51.100.0/24" {
		t.Errorf("MatchAddr(IPv4-mapped) = %+v, %v; want the /24", b, ok)
	}
	if _, ok := s.Match("", "198.51.100.9", t0.Add(time.Hour)); ok {
		t.Error("a ban still matches at its end")
	}
	if !s.Delete("manual", "198.51.100.0/24") || s.Delete("manual", "198.51.100.0/24") {
		t.Error("Delete of a ban, then again: want true, false")
	}
	if got := len(s.List(t0.Add(45 * time.Minute))); got != 3 {
		t.Errorf("List 45m on: %d bans, want 3", got)
	}
}

// TestBanSetFlood bans far more addresses than the set holds, as an
// attacker rotating addresses within a few networks makes a jail do: the
// set stays at its capacity, every banned address stays banned, and the
// bans are merged into networks, never dropped.
func TestBanSetFlood(t *testing.T) {
	const max = 1000
	s := guard.BanSet{BanLimits: guard.BanLimits{Max: max}}
	var banned []string
	for i := range 20_000 {
		var key string
		if i%2 == 0 { // 40 /24s of IPv4
			key = fmt.Sprintf("10.%d.%d.%d", i%4, i%40, i%251)
		} else { // IPv6 from 100 /64s
			key = fmt.Sprintf("2001:db8:%x:%x::%x", i%7, i%100, i)
		}
		b := ban("abuse", key, time.Duration(i+1)*time.Second)
		if _, err := s.Put(b, t0); err != nil {
			t.Fatalf("Put #%d (%s): %v", i, key, err)
		}
		banned = append(banned, key)
		if st := s.Stats(); st.Bans > max {
			t.Fatalf("after %d bans the set holds %d, more than its %d", i+1, st.Bans, max)
		}
	}
	for i, key := range banned {
		b, ok := s.Match("abuse", key, t0)
		if !ok || b.Until.Before(t0.Add(time.Duration(i+1)*time.Second)) {
			t.Fatalf("ban of %s lost or shortened: %+v, %v", key, b, ok)
		}
	}
	if st := s.Stats(); st.Coarsened == 0 || st.Refused != 0 || st.Bans > max/2 {
		t.Errorf("Stats() = %+v, want bans coarsened, none refused, at most %d (the addresses' share)", st, max/2)
	}
	// Keys that are no addresses cannot merge: beyond their share they
	// are refused, loudly, and what is held stays.
	held := s.Stats().Bans
	var err error
	for i := 0; err == nil && i <= max; i++ {
		_, err = s.Put(ban("abuse", fmt.Sprint("user-", i), time.Hour), t0)
	}
	if st := s.Stats(); !errors.Is(err, guard.ErrBansFull) || !errors.Is(err, sluice.ErrStoreFull) || st.Keys != max/2 || st.Bans != held+max/2 || st.RefusedKeys != 1 || st.Refused != 0 {
		t.Errorf("Put(key beyond its share) error = %v with %+v, want ErrBansFull at %d keys", err, st, max/2)
	}
	if _, ok := s.Match("abuse", banned[0], t0); !ok || held == 0 {
		t.Error("a ban was dropped to make room for a key")
	}
	// Lapsed bans make room.
	if _, err := s.Put(ban("abuse", "user-x", 30_000*time.Second), t0.Add(20_001*time.Second)); err != nil {
		t.Errorf("Put after every ban lapsed: %v", err)
	}
}

// TestBanSetPutMerged checks that PutMerged returns the bans a coarsening
// replaced, exactly those the set no longer holds, and that Get and
// BanKey read keys as Put does.
func TestBanSetPutMerged(t *testing.T) {
	s := guard.BanSet{BanLimits: guard.BanLimits{Max: 3}} // one key, two addresses
	for _, key := range []string{"192.0.2.1", "192.0.2.2", "alice"} {
		if _, m, err := s.PutMerged(ban("j", key, time.Hour), t0); err != nil || m.Into.Key != "" {
			t.Fatalf("PutMerged(%s) below capacity = %+v, %v; want no merge", key, m, err)
		}
	}
	rec, m, err := s.PutMerged(ban("j", "::ffff:192.0.2.3", 2*time.Hour), t0)
	if err != nil || rec.Key != "192.0.2.0/30" || !rec.Until.Equal(t0.Add(2*time.Hour)) || m.Into != rec || rec.Collateral != 1 {
		t.Fatalf("PutMerged at capacity = %+v, %+v, %v; want a 2h ban of 192.0.2.0/30, 1 address beyond its 3", rec, m, err)
	}
	var keys []string
	for _, b := range m.Merged {
		keys = append(keys, b.Key)
		if _, ok := s.Get("j", b.Key); ok {
			t.Errorf("merged ban of %s is still held", b.Key)
		}
	}
	if slices.Sort(keys); !slices.Equal(keys, []string{"192.0.2.1", "192.0.2.2"}) {
		t.Errorf("merged = %v, want the two addresses of the /30", keys)
	}
	for _, tt := range []struct {
		jail, key string
		want      bool
	}{
		{"j", "192.0.2.0/30", true},
		{"j", "192.0.2.0/255.255.255.252", false},
		{"j", "::ffff:192.0.2.0/126", true}, // the same network, written otherwise
		{"j", "192.0.2.3", false},           // covered, but not a ban of its own
		{"j", "alice", true},
		{"k", "alice", false},
	} {
		if _, ok := s.Get(tt.jail, tt.key); ok != tt.want {
			t.Errorf("Get(%q, %q) = %v, want %v", tt.jail, tt.key, ok, tt.want)
		}
	}
	// A network ban at capacity absorbs the bans within it, keeping its
	// reason, rather than merge into a wider network.
	s = guard.BanSet{BanLimits: guard.BanLimits{Max: 4, MaxKeys: 1}}
	for _, key := range []string{"192.0.2.1", "192.0.2.64", "198.51.100.1"} {
		if _, err := s.Put(ban("j", key, time.Hour), t0); err != nil {
			t.Fatal(err)
		}
	}
	net := ban("j", "192.0.2.0/24", 30*time.Minute)
	net.Reason = "by hand"
	rec, m, err = s.PutMerged(net, t0)
	if err != nil || rec.Key != "192.0.2.0/24" || rec.Reason != "by hand" || !rec.Until.Equal(t0.Add(time.Hour)) || len(m.Merged) != 2 || rec.Collateral != 0 {
		t.Errorf("PutMerged(a /24 at capacity) = %+v, %+v, %v; want the /24 for 1h absorbing 2 bans, its reason kept, no collateral", rec, m, err)
	}
	for key, want := range map[string]string{
		"::ffff:198.51.100.7":     "198.51.100.7",
		"2001:DB8::1/64":          "2001:db8::/64",
		"10.1.2.3/8":              "10.0.0.0/8",
		"alice":                   "alice",
		string(make([]byte, 300)): "sha256:",
	} {
		if got := guard.BanKey(key); got != want && !(want == "sha256:" && strings.HasPrefix(got, want)) {
			t.Errorf("BanKey(%.20q) = %q, want %q", key, got, want)
		}
	}
}

// TestBanSetLongKeys checks that a huge key costs a digest's room, and is
// still found.
func TestBanSetLongKeys(t *testing.T) {
	var s guard.BanSet
	long := string(make([]byte, 1<<20))
	b, err := s.Put(ban("j", long, time.Hour), t0)
	if err != nil || len(b.Key) > guard.MaxBanKey {
		t.Fatalf("Put(1 MiB key) = %d-byte key, %v", len(b.Key), err)
	}
	if _, ok := s.Match("j", long, t0); !ok {
		t.Error("the long key's ban is not found")
	}
	if _, ok := s.Match("j", long[:len(long)-1], t0); ok {
		t.Error("another long key matches")
	}
}

// FuzzBanKey bans arbitrary bytes and checks that nothing panics, that a
// ban is found by its own key and lifted by it, and that a ban of an
// address or network covers every address in it.
func FuzzBanKey(f *testing.F) {
	for _, s := range []string{"203.0.113.7", "198.51.100.0/24", "2001:db8::/64", "::ffff:1.2.3.4/120", "alice", "", "fe80::1%eth0", "1.2.3.4/33", "0.0.0.0/0", "::/0", "key:x"} {
		f.Add(s, "203.0.113.9")
	}
	f.Fuzz(func(t *testing.T, key, probe string) {
		var s guard.BanSet
		b, err := s.Put(ban("j", key, time.Hour), t0)
		if key == "" {
			if err == nil {
				t.Fatal("a ban without a key was accepted")
			}
			return
		}
		if err != nil {
			t.Fatalf("Put(%q): %v", key, err)
		}
		if got, ok := s.Match("j", key, t0); !ok || got.Key != b.Key {
			t.Fatalf("Match(%q) = %+v, %v; want the ban %q", key, got, ok, b.Key)
		}
		if p, err := netip.ParsePrefix(b.Key); err == nil {
			if a, err := netip.ParseAddr(probe); err == nil && a.Zone() == "" && p.Contains(a.Unmap()) {
				if _, ok := s.MatchAddr("j", a, t0); !ok {
					t.Fatalf("ban of %s does not cover %s", p, a)
				}
			}
		}
		s.Match("", probe, t0)
		if !s.Delete("j", key) || s.Stats().Bans != 0 {
			t.Fatalf("Delete(%q) left %d bans", key, s.Stats().Bans)
		}
	})
}

// FuzzBanSetCapacity bans what the bytes make (addresses of a few
// networks in every form, and usernames) into a set of 8 bans, two of
// them for usernames, with an allow-listed address among them: nothing
// panics, the set stays within its shares, every ban put is in force or
// its refusal was counted, and no merge covers the allowed address.
func FuzzBanSetCapacity(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 200, 201, 202})
	f.Add([]byte("\x00\x40\x80\xc0\x01\x41\x81\xc1\x02\x42\x82\xc2\xff\xfe\xfd"))
	f.Fuzz(func(t *testing.T, data []byte) {
		allow := &guard.List{}
		fill(t, allow, "192.0.2.77")
		s := guard.BanSet{BanLimits: guard.BanLimits{Max: 8, MaxKeys: 2}}
		s.Spare(allow)
		var put []string
		refused := 0
		for i, b := range data {
			var key string
			switch b >> 6 {
			case 0:
				key = fmt.Sprintf("192.0.2.%d", b&63+40) // around the allowed address
			case 1:
				key = fmt.Sprintf("::ffff:198.51.%d.%d", b&3, b&15)
			case 2:
				key = fmt.Sprintf("2001:0db8:%x:%x::1", b&3, b&15)
			default:
				key = fmt.Sprint("user-", b&63)
			}
			if key == "192.0.2.77" {
				continue // allow-listed: never banned
			}
			_, err := s.Put(ban("j", key, time.Duration(i+1)*time.Minute), t0)
			switch {
			case errors.Is(err, guard.ErrBansFull):
				refused++
			case err != nil:
				t.Fatalf("Put(%s): %v", key, err)
			default:
				put = append(put, key)
			}
		}
		st := s.Stats()
		if st.Bans > 8 || st.Keys > 2 || st.Refused+st.RefusedKeys != int64(refused) || st.CollateralIPv4 < 0 || st.CollateralIPv6 < 0 {
			t.Fatalf("Stats() = %+v with %d refused", st, refused)
		}
		for _, k := range put {
			if _, ok := s.Match("j", k, t0); !ok {
				t.Fatalf("ban of %s lost", k)
			}
		}
		if b, ok := s.Match("", "192.0.2.77", t0); ok {
			t.Fatalf("the allow-listed address is covered by %+v", b)
		}
	})
}

// TestBanSetRefusals: the set counts what each ban refused, under the
// ban's canonical key; a ban replaced in place keeps its count, one
// lifted loses it, a ban that is not held counts nothing, and the bans
// merged into a network ban at capacity give it theirs.
func TestBanSetRefusals(t *testing.T) {
	s := guard.BanSet{BanLimits: guard.BanLimits{Max: 4, MaxKeys: 1}} // room for 3 address bans
	put := func(b guard.Ban) {
		t.Helper()
		if _, err := s.Put(b, t0); err != nil {
			t.Fatalf("Put(%+v): %v", b, err)
		}
	}
	put(ban("j", "192.0.2.1", time.Hour))
	put(ban("j", "192.0.2.2", time.Hour))
	put(ban("j", "alice", time.Hour))
	s.CountRefusals("j", "192.0.2.1", 3)
	s.CountRefusals("j", "::ffff:192.0.2.1", 1) // the same address
	s.CountRefusals("j", "192.0.2.2", 5)
	s.CountRefusals("j", "alice", 2)
	s.CountRefusals("other", "alice", 7) // no such ban
	s.CountRefusals("j", "bob", 7)
	put(ban("j", "alice", 2*time.Hour)) // longer, in place
	want := map[guard.BanID]int64{{Jail: "j", Key: "192.0.2.1"}: 4, {Jail: "j", Key: "192.0.2.2"}: 5, {Jail: "j", Key: "alice"}: 2}
	if got := s.Refusals(); !maps.Equal(got, want) {
		t.Errorf("Refusals() = %v, want %v", got, want)
	}
	s.Delete("j", "alice")
	put(ban("j", "alice", time.Hour))
	put(ban("j", "192.0.2.3", time.Hour))
	put(ban("j", "192.0.2.200", time.Hour)) // full: 192.0.2.0/30 merges the first three
	want = map[guard.BanID]int64{{Jail: "j", Key: "192.0.2.0/30"}: 9}
	if got := s.Refusals(); !maps.Equal(got, want) {
		t.Errorf("after a lift and a merge, Refusals() = %v, want %v", got, want)
	}
}
