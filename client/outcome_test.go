package client_test

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/testing/testclock"
	"github.com/sluicehq/sluice/wire"
)

// TestOutcomes runs insert, reservations and reports through a real
// service: a reward ends a cached denial, a refund retried counts once,
// a commit of an unknown reservation is refused.
func TestOutcomes(t *testing.T) {
	s := startService(t, testclock.New(t0))
	ctx := t.Context()
	c := newClient(t, s, "http", client.Config{})
	if d, err := c.Insert(ctx, "api", "k", 3); err != nil || d.Allowed {
		t.Fatalf("Insert(3) on 3/min = %+v, %v; want denied after", d, err)
	}
	c.Check(ctx, "api", "k") // cached denial
	if d, err := c.Insert(ctx, "api", "k", -3); err != nil || !d.Allowed {
		t.Fatalf("Insert(-3) = %+v, %v; want allowed after", d, err)
	}
	if d, err := c.Check(ctx, "api", "k"); err != nil || !d.Allowed {
		t.Errorf("Check after the reward = %+v, %v; want allowed (no stale cached denial)", d, err)
	}
	req := wire.OutcomeRequest{Rule: "login", Key: "alice", ID: "r1"}
	if r, err := c.Reserve(ctx, req); err != nil || !r.Allowed || r.Expires == nil {
		t.Fatalf("Reserve = %+v, %v", r, err)
	}
	for i := range 2 {
		if r, err := c.Refund(ctx, req); err != nil || r.Duplicate != (i > 0) {
			t.Errorf("Refund %d = %+v, %v; want duplicate %v", i, r, err, i > 0)
		}
	}
	if _, err := c.Commit(ctx, wire.OutcomeRequest{Rule: "login", Key: "alice", ID: "nope"}); !errors.Is(err, sluice.ErrInvalidRequest) {
		t.Errorf("Commit of an unknown reservation = %v, want ErrInvalidRequest", err)
	}
	req.ID, req.Outcome = "f1", "failure"
	for i := range 3 {
		if r, err := c.Report(ctx, req); err != nil || r.Duplicate != (i > 0) {
			t.Errorf("Report %d = %+v, %v; want duplicate %v", i, r, err, i > 0)
		}
	}
	if d, _ := c.Peek(ctx, "login", "alice"); d.Remaining != 0 || !d.Allowed {
		t.Errorf("Peek after one failure reported 3 times on 2/min = %+v, want one left", d)
	}
	if _, err := c.LoginBegin(ctx, wire.LoginRequest{Login: "nope", Address: "192.0.2.1"}); !errors.Is(err, sluice.ErrInvalidRequest) {
		t.Errorf("LoginBegin of an unknown login = %v, want ErrInvalidRequest", err)
	}
}

// TestLeases takes the one place of a concurrency rule through a real
// service, is refused a second, extends and releases the first, and then
// gets the place again.
func TestLeases(t *testing.T) {
	s := startService(t, nil)
	ctx := t.Context()
	c := newClient(t, s, "http", client.Config{})
	first, err := c.Acquire(ctx, wire.AcquireRequest{Rule: "reports", Key: "k"})
	if err != nil || !first.OK || first.ID == "" || first.Expires == nil {
		t.Fatalf("Acquire = %+v, %v; want a lease", first, err)
	}
	if r, err := c.Acquire(ctx, wire.AcquireRequest{Rule: "reports", Key: "k", Class: "critical"}); err != nil || r.OK || r.InUse != 1 || r.RetryAfter <= 0 {
		t.Errorf("second Acquire = %+v, %v; want refused, 1 in use, a wait", r, err)
	}
	lease := wire.LeaseRef{Rule: "reports", Key: "k", ID: first.ID}
	if r, err := c.Extend(ctx, lease); err != nil || !r.OK {
		t.Errorf("Extend = %+v, %v; want renewed", r, err)
	}
	if r, err := c.Release(ctx, lease); err != nil || !r.OK {
		t.Errorf("Release = %+v, %v; want released", r, err)
	}
	if r, err := c.Release(ctx, lease); err != nil || r.OK {
		t.Errorf("second Release = %+v, %v; want not live", r, err)
	}
	if r, err := c.Acquire(ctx, wire.AcquireRequest{Rule: "reports", Key: "k"}); err != nil || !r.OK {
		t.Errorf("Acquire after the release = %+v, %v; want the place", r, err)
	}
	if _, err := c.Acquire(ctx, wire.AcquireRequest{Rule: "nope", Key: "k"}); !errors.Is(err, sluice.ErrInvalidRequest) {
		t.Errorf("Acquire of an unknown rule = %v, want ErrInvalidRequest", err)
	}
}
