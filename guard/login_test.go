package guard_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/testing/testclock"
)

func newLogin(t *testing.T, s sluice.Store, c *testclock.Clock, cfg guard.LoginConfig) *guard.Login {
	t.Helper()
	cfg.Clock = c.Now
	l, err := guard.NewLogin(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func ip(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}) }

// attempt begins a try and ends it as a failure (wrong password) or a
// success, and returns the attempt.
func attempt(t *testing.T, l *guard.Login, try guard.Try, ok bool) *guard.Attempt {
	t.Helper()
	ctx := context.Background()
	a, err := l.Begin(ctx, try)
	if err != nil {
		t.Fatalf("Begin(%v): %v", try, err)
	}
	if a.Allowed {
		if ok {
			err = a.Succeed(ctx)
		} else {
			_, _, err = a.Fail(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func TestLoginDictionaryFromOneAddress(t *testing.T) {
	c := testclock.New(testclock.T0)
	l := newLogin(t, newStore(t), c, guard.LoginConfig{})
	try := guard.Try{IP: ip(1), Username: "alice"}
	wantDelay := []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}
	for i := range 5 {
		a := attempt(t, l, try, false)
		if !a.Allowed || a.Delay != wantDelay[i] || a.Captcha != (i >= 3) {
			t.Fatalf("attempt %d: allowed %v, delay %v, captcha %v; want true, %v, %v", i, a.Allowed, a.Delay, a.Captcha, wantDelay[i], i >= 3)
		}
	}
	a := attempt(t, l, try, false)
	if a.Allowed || a.RetryAfter != 3*time.Minute {
		t.Fatalf("6th attempt: allowed %v, retry after %v; want denied for 3m", a.Allowed, a.RetryAfter)
	}
	// Other accounts from the same address are not locked.
	if a := attempt(t, l, guard.Try{IP: ip(1), Username: "bob"}, false); !a.Allowed {
		t.Error("other account from the same address denied")
	}
	// The same account from another address is not locked either.
	if a := attempt(t, l, guard.Try{IP: ip(2), Username: "alice"}, true); !a.Allowed {
		t.Error("same account from another address denied")
	}
}

// TestLoginBotnet: many addresses against one account put it under
// attack; its known-good address still gets in, and so does a client
// that solved a CAPTCHA.
func TestLoginBotnet(t *testing.T) {
	c := testclock.New(testclock.T0)
	var attacks []guard.Attack
	l := newLogin(t, newStore(t), c, guard.LoginConfig{PerUser: sluice.PerHour(10), OnAttack: func(a guard.Attack) { attacks = append(attacks, a) }})
	home := netip.MustParseAddr("203.0.113.50")
	attempt(t, l, guard.Try{IP: home, Username: "alice"}, true) // yesterday's login
	c.Advance(24 * time.Hour)
	for i := range 10 {
		if a := attempt(t, l, guard.Try{IP: ip(i), Username: "alice"}, false); !a.Allowed {
			t.Fatalf("bot %d denied before the account limit", i)
		}
	}
	for i := 10; i < 20; i++ {
		a := attempt(t, l, guard.Try{IP: ip(i), Username: "Alice"}, false)
		if a.Allowed || !a.Captcha {
			t.Fatalf("bot %d: allowed %v captcha %v, want denied with a CAPTCHA demanded", i, a.Allowed, a.Captcha)
		}
	}
	if len(attacks) != 1 || attacks[0].Scope != "account" || attacks[0].User != l.HashUser("alice") {
		t.Errorf("OnAttack told %+v, want one account attack", attacks)
	}
	if a := attempt(t, l, guard.Try{IP: home, Username: "alice"}, true); !a.Allowed || !a.KnownGood || a.Delay != 0 {
		t.Errorf("known-good address: %+v, want allowed, known-good, no delay", a)
	}
	if a := attempt(t, l, guard.Try{IP: ip(99), Username: "alice", CaptchaSolved: true}, true); !a.Allowed {
		t.Errorf("CAPTCHA solved: %+v, want allowed", a)
	}
	// The per-address limit still holds past a CAPTCHA.
	for range 5 {
		attempt(t, l, guard.Try{IP: ip(98), Username: "alice", CaptchaSolved: true}, false)
	}
	if a := attempt(t, l, guard.Try{IP: ip(98), Username: "alice", CaptchaSolved: true}, false); a.Allowed {
		t.Error("CAPTCHA solver passed the per-address limit")
	}
}

// TestLoginNoEnumeration: an existing and an invented account with the
// same history get the same decisions.
func TestLoginNoEnumeration(t *testing.T) {
	c := testclock.New(testclock.T0)
	l := newLogin(t, newStore(t), c, guard.LoginConfig{})
	for i := range 8 {
		a := attempt(t, l, guard.Try{IP: ip(1), Username: "alice"}, false)
		b := attempt(t, l, guard.Try{IP: ip(2), Username: "no-such-user-\xff"}, false)
		if a.Allowed != b.Allowed || a.Delay != b.Delay || a.Captcha != b.Captcha || a.RetryAfter != b.RetryAfter {
			t.Errorf("attempt %d: real %+v, invented %+v differ", i, *a, *b)
		}
	}
}

// TestLoginSuccessForgets: a success forgets the failures of its address
// on its account (not those of the address on other accounts, which an
// attacker with one account of its own could otherwise wipe).
func TestLoginSuccessForgets(t *testing.T) {
	c := testclock.New(testclock.T0)
	l := newLogin(t, newStore(t), c, guard.LoginConfig{PerIPUser: sluice.PerHour(3)})
	try := guard.Try{IP: ip(1), Username: "alice"}
	for range 2 {
		attempt(t, l, try, false)
	}
	for range 5 { // successes consume nothing
		if a := attempt(t, l, try, true); !a.Allowed {
			t.Fatal("success denied")
		}
	}
	for range 3 {
		if a := attempt(t, l, try, false); !a.Allowed {
			t.Fatal("failures before the success still count")
		}
	}
}

func TestLoginJail(t *testing.T) {
	ctx := context.Background()
	c := testclock.New(testclock.T0)
	s := newStore(t)
	j, _ := guard.NewJail(s, guard.JailConfig{MaxFailures: 4, Clock: c.Now})
	l := newLogin(t, s, c, guard.LoginConfig{Jail: j})
	for i := range 4 { // four accounts, one address: the jail bans it
		attempt(t, l, guard.Try{IP: ip(7), Username: fmt.Sprint("user", i)}, false)
	}
	if _, banned, _ := j.Banned(ctx, ip(7).String()); !banned {
		t.Fatal("address not banned after 4 failures")
	}
	a := attempt(t, l, guard.Try{IP: ip(7), Username: "fresh"}, true)
	if a.Allowed || a.RetryAfter <= 0 {
		t.Errorf("banned address: %+v, want denied with RetryAfter", a)
	}
}

func TestLoginStoreFailure(t *testing.T) {
	c := testclock.New(testclock.T0)
	s := newStore(t)
	l := newLogin(t, s, c, guard.LoginConfig{})
	s.SetFail(true)
	if _, err := l.Begin(context.Background(), guard.Try{IP: ip(1), Username: "alice"}); !errors.Is(err, sluice.ErrStore) {
		t.Errorf("Begin with a failed store: err = %v, want ErrStore", err)
	}
}

func TestAttemptWait(t *testing.T) {
	a := &guard.Attempt{Delay: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait(cancelled) = %v, want context.Canceled", err)
	}
	if err := (&guard.Attempt{}).Wait(context.Background()); err != nil {
		t.Errorf("Wait without delay = %v", err)
	}
}

// TestLoginIPv6Rotation: an attacker who tries each password from
// another address of its /64 is counted, and jailed, as one address.
func TestLoginIPv6Rotation(t *testing.T) {
	c := testclock.New(testclock.T0)
	s := newStore(t)
	j, _ := guard.NewJail(s, guard.JailConfig{MaxFailures: 3, Clock: c.Now})
	l := newLogin(t, s, c, guard.LoginConfig{Jail: j, PerIPUser: sluice.PerHour(100), PerIP: sluice.PerHour(5)})
	allowed := 0
	for i := range 20 {
		a := attempt(t, l, guard.Try{IP: netip.MustParseAddr(fmt.Sprintf("2001:db8:7:7::%x", i+1)), Username: fmt.Sprint("user", i)}, false)
		if a.Allowed {
			allowed++
		}
	}
	if allowed != 3 { // the jail bans the /64 after 3 failures, before PerIP's 5
		t.Errorf("20 attempts from one /64: %d allowed, want 3", allowed)
	}
	if _, banned, _ := j.Banned(context.Background(), "2001:db8:7:7:abcd::1"); !banned {
		t.Error("another address of the /64 is not banned")
	}
	if a := attempt(t, l, guard.Try{IP: netip.MustParseAddr("2001:db8:7:8::1"), Username: "x"}, false); !a.Allowed {
		t.Errorf("another /64: %+v, want allowed", a)
	}
}
