package httplimit_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testing/testclock"
	"github.com/sluicehq/sluice/store/memory"
)

// adaptiveSite is a service limited to 10 a minute per AdaptivePrefix
// key, on a fake clock.
type adaptiveSite struct {
	t   *testing.T
	c   *testclock.Clock
	ap  *httplimit.AdaptivePrefix
	srv http.Handler
}

func newAdaptiveSite(t *testing.T, s sluice.Store) *adaptiveSite {
	t.Helper()
	c := testclock.New(testclock.T0)
	ap, err := httplimit.NewAdaptivePrefix(s, httplimit.AdaptiveConfig{Clock: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	m := middleware(t, httplimit.Config{Rules: []httplimit.Rule{{Limiter: limiter(t, s, c, "api", "10/min"), Key: ap}}})
	return &adaptiveSite{t: t, c: c, ap: ap, srv: m.Handler(&recordingHandler{})}
}

// hit asks n times from addr and returns how many were allowed.
func (a *adaptiveSite) hit(addr string, n int) int {
	allowed := 0
	for range n {
		if serve(a.srv, request("["+addr+"]:1")).Code == http.StatusOK {
			allowed++
		}
	}
	return allowed
}

// key returns the key of addr.
func (a *adaptiveSite) key(addr string) string {
	k, _ := a.ap.Key(request("[" + addr + "]:1"))
	return k
}

// TestAdaptivePrefixRotation: what an attacker rotating through the
// addresses of one /64, or the /64s of one /48, gets at 10 a minute, at
// its best, and what it costs the others.
func TestAdaptivePrefixRotation(t *testing.T) {
	for _, tt := range []struct {
		name   string
		attack func(a *adaptiveSite) int // returns how many were allowed
		max    int
	}{
		{"1000 addresses of one /64, one request each", func(a *adaptiveSite) int {
			n := 0
			for i := range 1000 {
				n += a.hit(fmt.Sprintf("2001:db8:1:2::%x", i+1), 1)
			}
			return n
		}, 10},
		{"1000 addresses of one /64, to the first denial each", func(a *adaptiveSite) int {
			n := 0
			for i := range 1000 {
				n += a.hit(fmt.Sprintf("2001:db8:1:2:%x::1", i+1), 11)
			}
			return n
		}, 10},
		{"200 fresh /64s of one /48, to the first denial each", func(a *adaptiveSite) int {
			n := 0
			for i := range 200 {
				n += a.hit(fmt.Sprintf("2001:db8:1:%x::1", i+1), 11)
			}
			return n
		}, (httplimit.DefaultAdaptiveSubnets + 1) * 10},
		{"200 fresh /64s of one /48, one request each", func(a *adaptiveSite) int {
			n := 0
			for i := range 200 {
				n += a.hit(fmt.Sprintf("2001:db8:1:%x::1", i+1), 1)
			}
			return n
		}, httplimit.DefaultAdaptiveSubnets + 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := newAdaptiveSite(t, newStore(t))
			if got := tt.attack(a); got > tt.max {
				t.Errorf("allowed %d, want at most %d", got, tt.max)
			}
		})
	}
}

// TestAdaptivePrefixSustained runs the attacker's best case for three
// windows: every minute, 20 /64s of its /48, the same ones (so that
// those holding a grant keep it) and 20 fresh ones, each to its first
// denial; while innocent clients ask 10 a minute each: one in another
// /48, one of the attacked /48 that held a grant before the attack, and
// one of the attacked /48 that arrives during it.
func TestAdaptivePrefixSustained(t *testing.T) {
	a := newAdaptiveSite(t, newStore(t))
	const before, other, late = "2001:db8:1:ffff::1", "2001:db8:2:1::1", "2001:db8:1:fffe::1"
	if got := a.hit(before, 10); got != 10 {
		t.Fatalf("the neighbour before the attack: %d of 10 allowed", got)
	}
	a.c.Advance(time.Minute)
	worst, fresh := 0, 0
	for minute := range 180 {
		got := 0
		for i := range 20 {
			got += a.hit(fmt.Sprintf("2001:db8:1:%x::1", i+1), 11)
			got += a.hit(fmt.Sprintf("2001:db8:1:%x:%x::1", 100+fresh, minute), 11)
			fresh = (fresh + 1) % 0xff00
		}
		worst = max(worst, got)
		if n := a.hit(other, 10); n != 10 {
			t.Fatalf("minute %d: a client of another /48 allowed %d of 10", minute, n)
		}
		if n := a.hit(before, 10); minute < 59 && n != 10 {
			t.Fatalf("minute %d: the neighbour that held a grant before the attack allowed %d of 10", minute, n)
		}
		a.hit(late, 10) // its price: it shares the /48's key with the attacker
		if k := a.key(fmt.Sprintf("2001:db8:1:fffd:%x::1", minute)); minute%60 == 30 && k != "2001:db8:1::/48" {
			t.Errorf("minute %d: key of a neighbour arriving during the attack = %q, want the /48 it shares", minute, k)
		}
		a.c.Advance(time.Minute)
	}
	if want := (httplimit.DefaultAdaptiveSubnets + 1) * 10; worst > want {
		t.Errorf("the attacker's best minute: %d allowed, want at most %d", worst, want)
	}
	t.Logf("the attacker's best minute: %d allowed (a fixed /64 would allow 400); %+v", worst, a.ap.Stats())
	if st := a.ap.Stats(); st.Shared == 0 || st.Granted == 0 {
		t.Errorf("Stats() = %+v, want grants and shared keys counted", st)
	}
}

// TestAdaptivePrefixKeys checks the keys of addresses in every textual
// form, and that clients of different /48s never share one.
func TestAdaptivePrefixKeys(t *testing.T) {
	a := newAdaptiveSite(t, newStore(t))
	for i := range 10 { // the /48 of 2001:db8:1:: has no grant left
		a.hit(fmt.Sprintf("2001:db8:1:%x::1", i+1), 1)
	}
	for _, tt := range []struct{ remote, want string }{
		{"203.0.113.7:1", "203.0.113.7/32"},
		{"[::ffff:203.0.113.7]:1", "203.0.113.7/32"},
		{"[2001:0db8:0000:0002:0000::1]:1", "2001:db8:0:2::/64"},
		{"[2001:DB8:0:3::1%eth0]:1", "2001:db8:0:3::/64"},
		{"[fe80::1%25eth0]:1", "fe80::/64"},
		{"[2001:db8:1:1::99]:1", "2001:db8:1:1::/64"},  // holds a grant
		{"[2001:db8:1:ff::1]:1", "2001:db8:1::/48"},    // the /48's shared key
		{"[2001:db8:2:ff::1]:1", "2001:db8:2:ff::/64"}, // another /48
	} {
		if got, ok := a.ap.Key(request(tt.remote)); got != tt.want {
			t.Errorf("Key(%s) = %q, %v; want %q", tt.remote, got, ok, tt.want)
		}
	}
	if _, ok := a.ap.Key(request("@unix")); ok {
		t.Error("a Unix socket has a key")
	}
	s := newStore(t)
	for _, c := range []httplimit.AdaptiveConfig{{Site: 64}, {Subnet: 129}, {Site: -1}, {Subnets: -1}, {Subnets: sluice.MaxLogRate + 1}} {
		if _, err := httplimit.NewAdaptivePrefix(s, c); !errors.Is(err, sluice.ErrInvalidRequest) {
			t.Errorf("NewAdaptivePrefix(%+v) error = %v, want ErrInvalidRequest", c, err)
		}
	}
}

// TestAdaptivePrefixStoreFull: a store at its cap that forgot the /48's
// grants charges them conservatively, so the attacker's fresh /64s still
// share the /48's key; a forgotten grant is asked for again, never
// handed out.
func TestAdaptivePrefixStoreFull(t *testing.T) {
	ms := memory.New(memory.Config{MaxBytes: 64 << 10})
	t.Cleanup(func() { ms.Close() })
	a := newAdaptiveSite(t, ms)
	for i := range 20 {
		a.hit(fmt.Sprintf("2001:db8:1:%x::1", i+1), 1)
	}
	for i := range 50_000 { // a flood of sites, far beyond the cap
		a.hit(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb9, byte(i >> 8), byte(i), 0, 1, 15: 1}).String(), 1)
	}
	got := 0
	for i := range 200 {
		got += a.hit(fmt.Sprintf("2001:db8:1:%x::1", 0x100+i), 11)
	}
	if want := (httplimit.DefaultAdaptiveSubnets + 1) * 10; got > want {
		t.Errorf("200 fresh /64s of the /48 after a flood of sites: %d allowed, want at most %d", got, want)
	}
	t.Logf("after the flood: %d allowed; %+v", got, a.ap.Stats())
}

// FuzzAdaptivePrefixKey keys any address, in any form a connection
// gives it: no panic; an IPv6 key is the address's /64 or /48, never
// narrower, an IPv4 key its /32.
func FuzzAdaptivePrefixKey(f *testing.F) {
	f.Add([]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}, "")
	f.Add([]byte{10: 0xff, 11: 0xff, 12: 203, 13: 0, 14: 113, 15: 7}, "eth0")
	ms := memory.New(memory.Config{})
	f.Cleanup(func() { ms.Close() })
	ap, err := httplimit.NewAdaptivePrefix(ms, httplimit.AdaptiveConfig{Subnets: 1})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte, zone string) {
		if len(b) < 16 {
			return
		}
		a := netip.AddrFrom16([16]byte(b[:16]))
		key := ap.KeyOf(t.Context(), a.WithZone(zone))
		p, err := netip.ParsePrefix(key)
		switch {
		case err != nil:
			t.Fatalf("KeyOf(%s) = %q, not a prefix", a, key)
		case !p.Contains(a.Unmap()):
			t.Fatalf("KeyOf(%s) = %s, which does not hold it", a, p)
		case a.Unmap().Is4() && p.Bits() != 32, a.Unmap().Is6() && p.Bits() != 64 && p.Bits() != 48:
			t.Fatalf("KeyOf(%s) = %s, want a /32, /64 or /48", a, p)
		}
	})
}
