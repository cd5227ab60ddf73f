package rules

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

const outcomeRules = "rules:\n  - name: login\n    limits: [\"5/min\"]\n"

// remaining peeks at key's remaining allowance under the login rule.
func remaining(t *testing.T, e *Engine, key string) int {
	t.Helper()
	res, err := e.Check(context.Background(), Request{Domain: "login", Descriptors: []Descriptor{Key(key)}, Op: sluice.OpPeek})
	if err != nil {
		t.Fatal(err)
	}
	return res.Statuses[0].Decision.Remaining + 1 // a peek's Remaining is what a take would leave
}

// TestReserveCommitRefund walks reservations through their life: a take
// held, a retried reserve that takes nothing, a refund counted once, a
// commit, and a reservation that expired and stays counted.
func TestReserveCommitRefund(t *testing.T) {
	ctx := context.Background()
	e, clk, _ := newEngine(t, outcomeRules)
	o := OutcomeRequest{Rule: "login", Key: "alice", Cost: 2, ID: "req-1"}
	res, err := e.Reserve(ctx, o)
	if err != nil || !res.Status.Allowed || res.Duplicate || !res.Expires.Equal(start.Add(ReservationTTL)) {
		t.Fatalf("Reserve = %+v, %v; want allowed, expiring after the TTL", res, err)
	}
	if res, err := e.Reserve(ctx, o); err != nil || !res.Duplicate || !res.Expires.IsZero() {
		t.Fatalf("retried Reserve = %+v, %v; want a duplicate", res, err)
	}
	if got := remaining(t, e, "alice"); got != 3 {
		t.Fatalf("remaining after a reservation of 2 (retried) = %d, want 3", got)
	}
	for i := range 3 {
		res, err := e.Refund(ctx, o)
		if err != nil || res.Duplicate != (i > 0) {
			t.Fatalf("refund %d = %+v, %v; want duplicate %v", i, res, err, i > 0)
		}
	}
	if got := remaining(t, e, "alice"); got != 5 {
		t.Errorf("remaining after the refund (sent 3 times) = %d, want 5", got)
	}
	if _, err := e.Commit(ctx, OutcomeRequest{Rule: "login", Key: "alice", Cost: 2, ID: "never"}); !errors.Is(err, ErrNoReservation) {
		t.Errorf("commit of an unknown id = %v, want ErrNoReservation", err)
	}
	if _, err := e.Refund(ctx, OutcomeRequest{Rule: "login", Key: "bob", Cost: 2, ID: "req-1"}); !errors.Is(err, ErrNoReservation) {
		t.Errorf("refund of the id for another key = %v, want ErrNoReservation", err)
	}

	o2 := OutcomeRequest{Rule: "login", Key: "carol", ID: "req-2"}
	if _, err := e.Reserve(ctx, o2); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Commit(ctx, o2); err != nil || res.Duplicate {
		t.Fatalf("commit = %+v, %v", res, err)
	}
	if res, err := e.Refund(ctx, o2); err != nil || !res.Duplicate {
		t.Errorf("refund after a commit = %+v, %v; want a duplicate that gives nothing back", res, err)
	}
	if got := remaining(t, e, "carol"); got != 4 {
		t.Errorf("remaining after a committed reservation = %d, want 4", got)
	}

	o3 := OutcomeRequest{Rule: "login", Key: "dave", ID: "req-3"}
	if _, err := e.Reserve(ctx, o3); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(ReservationTTL)
	if _, err := e.Refund(ctx, o3); !errors.Is(err, ErrNoReservation) {
		t.Errorf("refund after the TTL = %v, want ErrNoReservation", err)
	}
}

// TestReserveDenied checks that a denied reservation holds nothing: no
// expiry, and a retry with the same id tries again.
func TestReserveDenied(t *testing.T) {
	ctx := context.Background()
	e, clk, _ := newEngine(t, outcomeRules)
	admitted(t, e, "login", 5, Key("eve"))
	o := OutcomeRequest{Rule: "login", Key: "eve", ID: "x"}
	if res, err := e.Reserve(ctx, o); err != nil || res.Status.Allowed || !res.Expires.IsZero() {
		t.Fatalf("Reserve over the limit = %+v, %v; want denied, no reservation", res, err)
	}
	if _, err := e.Refund(ctx, o); !errors.Is(err, ErrNoReservation) {
		t.Errorf("refund of a denied reservation = %v, want ErrNoReservation", err)
	}
	clk.t = clk.t.Add(time.Minute)
	if res, err := e.Reserve(ctx, o); err != nil || !res.Status.Allowed || res.Duplicate {
		t.Errorf("retried Reserve once allowed = %+v, %v; want a fresh reservation", res, err)
	}
}

// TestReportFailure checks that a failure reported three times with one
// id counts once, that it counts past the limit, and what bad reports get.
func TestReportFailure(t *testing.T) {
	ctx := context.Background()
	e, _, _ := newEngine(t, outcomeRules)
	o := OutcomeRequest{Rule: "login", Key: "mallory", Cost: 3, ID: "fail-1"}
	for i := range 3 {
		res, err := e.Report(ctx, o, "failure")
		if err != nil || res.Duplicate != (i > 0) {
			t.Fatalf("report %d = %+v, %v; want duplicate %v", i, res, err, i > 0)
		}
	}
	if got := remaining(t, e, "mallory"); got != 2 {
		t.Errorf("remaining after a failure of 3 reported 3 times = %d, want 2", got)
	}
	for i := range 3 {
		o.ID = "fail-more-" + string(rune('a'+i))
		if _, err := e.Report(ctx, o, "failure"); err != nil {
			t.Fatal(err)
		}
	}
	if res, _ := e.Report(ctx, OutcomeRequest{Rule: "login", Key: "mallory", ID: "ok-1"}, "success"); res.Status.Allowed {
		t.Errorf("after failures past the limit, the actor may still act: %+v", res.Status.Decision)
	}
	bad := []struct {
		o       OutcomeRequest
		outcome string
		want    error
	}{
		{OutcomeRequest{Rule: "login", Key: "k", ID: "1"}, "maybe", ErrUnknownOutcome},
		{OutcomeRequest{Rule: "login", Key: "k", ID: strings.Repeat("x", MaxOutcomeID+1)}, "failure", sluice.ErrInvalidRequest},
		{OutcomeRequest{Rule: "login", Key: "k"}, "failure", sluice.ErrInvalidRequest},
		{OutcomeRequest{Rule: "login", ID: "1"}, "failure", sluice.ErrInvalidRequest},
		{OutcomeRequest{Rule: "login", Key: "k", ID: "1", Cost: -1}, "failure", sluice.ErrInvalidRequest},
		{OutcomeRequest{Rule: "login", Key: "k", ID: "1", Cost: 1 << 40}, "failure", sluice.ErrCostExceedsBurst},
		{OutcomeRequest{Rule: "nope", Key: "k", ID: "1"}, "failure", ErrUnknownDomain},
	}
	for _, b := range bad {
		if _, err := e.Report(ctx, b.o, b.outcome); !errors.Is(err, b.want) {
			t.Errorf("Report(%+v, %q) = %v, want %v", b.o, b.outcome, err, b.want)
		}
	}
}

// TestInsertOverRules checks inserts through the engine: a penalty
// counted past the limit, a reward, and costs out of bounds.
func TestInsertOverRules(t *testing.T) {
	ctx := context.Background()
	e, _, _ := newEngine(t, outcomeRules)
	ins := func(cost int) (Result, error) {
		return e.Check(ctx, Request{Domain: "login", Descriptors: []Descriptor{Key("k")}, Op: sluice.OpInsert, Cost: cost})
	}
	for range 3 {
		if _, err := ins(4); err != nil {
			t.Fatal(err)
		}
	}
	res, err := ins(-5)
	if err != nil || !res.Allowed {
		t.Fatalf("reward of 5 after penalties of 12 = %+v, %v; want allowed (the penalties were capped)", res, err)
	}
	if res, _ := ins(6); res.Statuses[0].Err == nil || res.Allowed {
		t.Errorf("penalty over the burst = %+v, want ErrCostExceedsBurst", res.Statuses[0])
	}
}
