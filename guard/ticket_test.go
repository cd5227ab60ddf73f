package guard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/testing/testclock"
)

// TestTicketResume begins attempts on one Login and settles them on
// another over the same store, as two processes of a service would: a
// success gives the reserved failure back and makes the address
// known-good, a failure counts and feeds the jail, and each ticket is
// settled once however often it is sent.
func TestTicketResume(t *testing.T) {
	ctx := context.Background()
	c := testclock.New(testclock.T0)
	s := newStore(t)
	j, _ := guard.NewJail(s, guard.JailConfig{MaxFailures: 3, Clock: c.Now})
	cfg := guard.LoginConfig{PerIPUser: sluice.PerHour(3), Jail: j}
	begin, settle := newLogin(t, s, c, cfg), newLogin(t, s, c, cfg)
	try := guard.Try{IP: ip(1), Username: "alice"}

	a, err := begin.Begin(ctx, try)
	if err != nil || !a.Allowed {
		t.Fatalf("Begin = %+v, %v", a, err)
	}
	tk, err := guard.ParseTicket(a.Ticket().String())
	if err != nil || len(tk.Times) != 4 || tk.Nonce != a.Ticket().Nonce {
		t.Fatalf("ticket %q parsed = %v, %v; want 4 times", a.Ticket(), tk, err)
	}
	for i := range 3 {
		r, err := settle.Resume(ctx, try, tk)
		if err != nil || r.Settled != (i > 0) {
			t.Fatalf("Resume %d = %+v, %v; want settled %v", i, r, err, i > 0)
		}
		if err := r.Succeed(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The success gave its unit back: three failures still fit.
	for i := range 3 {
		a, _ := begin.Begin(ctx, try)
		if !a.Allowed || !a.KnownGood {
			t.Fatalf("attempt %d after a success: %+v, want allowed from a known-good address", i, a)
		}
		r, err := settle.Resume(ctx, try, a.Ticket())
		if err != nil || r.Settled {
			t.Fatalf("Resume of failure %d = %+v, %v", i, r, err)
		}
		for range 2 { // a retried report of the same failure
			if _, _, err := r.Fail(ctx); err != nil {
				t.Fatal(err)
			}
			r, _ = settle.Resume(ctx, try, a.Ticket())
		}
	}
	if a, _ := begin.Begin(ctx, try); a.Allowed {
		t.Errorf("4th failure in the hour allowed: %+v", a)
	}
	if _, banned, _ := j.Banned(ctx, ip(1).String()); !banned {
		t.Error("3 failures reported through tickets did not reach the jail")
	}
}

// TestTicketErrors checks malformed and stale tickets.
func TestTicketErrors(t *testing.T) {
	c := testclock.New(testclock.T0)
	l := newLogin(t, newStore(t), c, guard.LoginConfig{})
	for _, s := range []string{"", "0", "x", "1.2", "1.2.3.4", "7.a.b", "7.-5.1", "1.2.3.4.5.6", "-"} {
		if _, err := guard.ParseTicket(s); !errors.Is(err, guard.ErrInvalidTicket) {
			t.Errorf("ParseTicket(%q) = %v, want ErrInvalidTicket", s, err)
		}
	}
	old := guard.Ticket{Nonce: 1, Times: []time.Time{c.Now().Add(-2 * time.Hour), c.Now()}}
	if _, err := l.Resume(context.Background(), guard.Try{IP: ip(1), Username: "a"}, old); !errors.Is(err, guard.ErrInvalidTicket) {
		t.Errorf("Resume of a 2-hour-old ticket = %v, want ErrInvalidTicket", err)
	}
	if tk, err := guard.ParseTicket("42"); err != nil || len(tk.Times) != 0 || tk.Nonce != 42 {
		t.Errorf(`ParseTicket("42") = %v, %v; want a ticket of nothing reserved`, tk, err)
	}
}
