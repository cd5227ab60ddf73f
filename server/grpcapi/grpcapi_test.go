package grpcapi_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/testing/rlstest"
	"github.com/sluicehq/sluice/internal/testing/servicetest"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/envoyrls"
	"github.com/sluicehq/sluice/wire/sluicepb"
)

// newClient serves a service of the rules in yml on a loopback gRPC
// listener, as sluice serve does, and returns a client of its API.
func newClient(t *testing.T, yml string) sluicepb.LimitsClient {
	t.Helper()
	svc := servicetest.New(t, yml, server.Options{})
	g := envoyrls.NewServer(svc.RateLimitService())
	svc.LimitsService().Register(g)
	return sluicepb.NewLimitsClient(rlstest.ServeGRPC(t, g))
}

const rulesYAML = "rules:\n  - name: login\n    limits: [\"5/min\"]\n"

// TestOutcomeCalls runs every call of the API against a served service:
// a reservation refunded twice (counted once), a failure reported three
// times (counted once), a penalty and a reward.
func TestOutcomeCalls(t *testing.T) {
	ctx := t.Context()
	c := newClient(t, rulesYAML)
	req := &sluicepb.OutcomeRequest{Rule: "login", Key: "alice", Cost: 2, Id: "r1"}
	res, err := c.Reserve(ctx, req)
	if err != nil || !res.GetDecision().GetAllowed() || res.GetExpires() == nil || res.GetDecision().GetRemaining() != 3 {
		t.Fatalf("Reserve = %v, %v; want allowed with 3 remaining and an expiry", res, err)
	}
	if res, err := c.Reserve(ctx, req); err != nil || !res.GetDuplicate() {
		t.Errorf("retried Reserve = %v, %v; want a duplicate", res, err)
	}
	for i := range 2 {
		res, err := c.Refund(ctx, req)
		if err != nil || res.GetDuplicate() != (i > 0) || res.GetDecision().GetRemaining() != 4 {
			t.Errorf("Refund %d = %v, %v; want duplicate %v, 4 remaining after a peek", i, res, err, i > 0)
		}
	}
	fail := &sluicepb.OutcomeRequest{Rule: "login", Key: "alice", Cost: 4, Id: "f1", Outcome: sluicepb.Outcome_OUTCOME_FAILURE}
	for i := range 3 {
		if res, err := c.Report(ctx, fail); err != nil || res.GetDuplicate() != (i > 0) || res.GetDecision().GetRemaining() != 0 {
			t.Errorf("Report %d = %v, %v; want duplicate %v, nothing more after a peek", i, res, err, i > 0)
		}
	}
	if d, err := c.Insert(ctx, &sluicepb.InsertRequest{Rule: "login", Key: "alice", Cost: -3}); err != nil || d.GetRemaining() != 3 {
		t.Errorf("reward of 3 = %v, %v; want 3 remaining after a peek", d, err)
	}
	if d, err := c.Insert(ctx, &sluicepb.InsertRequest{Rule: "login", Key: "bob", Cost: 5}); err != nil || d.GetAllowed() || d.GetRetryAfter().AsDuration() <= 0 {
		t.Errorf("penalty of the whole burst = %v, %v; want denied with a wait", d, err)
	}
}

// TestErrors checks the status of each kind of bad call.
func TestErrors(t *testing.T) {
	ctx := t.Context()
	c := newClient(t, rulesYAML)
	tests := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"unknown rule", func() error {
			_, err := c.Insert(ctx, &sluicepb.InsertRequest{Rule: "nope", Key: "k", Cost: 1})
			return err
		}, codes.InvalidArgument},
		{"insert no key", func() error {
			_, err := c.Insert(ctx, &sluicepb.InsertRequest{Rule: "login", Cost: 1})
			return err
		}, codes.InvalidArgument},
		{"insert cost 0", func() error {
			_, err := c.Insert(ctx, &sluicepb.InsertRequest{Rule: "login", Key: "k"})
			return err
		}, codes.InvalidArgument},
		{"insert over burst", func() error {
			_, err := c.Insert(ctx, &sluicepb.InsertRequest{Rule: "login", Key: "k", Cost: -6})
			return err
		}, codes.InvalidArgument},
		{"insert huge", func() error {
			_, err := c.Insert(ctx, &sluicepb.InsertRequest{Rule: "login", Key: "k", Cost: 1 << 62})
			return err
		}, codes.InvalidArgument},
		{"report no outcome", func() error {
			_, err := c.Report(ctx, &sluicepb.OutcomeRequest{Rule: "login", Key: "k", Id: "1"})
			return err
		}, codes.InvalidArgument},
		{"report no id", func() error {
			_, err := c.Report(ctx, &sluicepb.OutcomeRequest{Rule: "login", Key: "k", Outcome: sluicepb.Outcome_OUTCOME_FAILURE})
			return err
		}, codes.InvalidArgument},
		{"reserve negative cost", func() error {
			_, err := c.Reserve(ctx, &sluicepb.OutcomeRequest{Rule: "login", Key: "k", Id: "1", Cost: -1})
			return err
		}, codes.InvalidArgument},
		{"commit unknown", func() error {
			_, err := c.Commit(ctx, &sluicepb.OutcomeRequest{Rule: "login", Key: "k", Id: "nope"})
			return err
		}, codes.FailedPrecondition},
	}
	for _, tt := range tests {
		if got := status.Code(tt.call()); got != tt.want {
			t.Errorf("%s: code %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestLoginCalls runs the login calls: a begun attempt failed (the
// failure retried, counted once), a success from the same address, and
// the errors of an unknown login, a bad address and a bad ticket.
func TestLoginCalls(t *testing.T) {
	ctx := t.Context()
	c := newClient(t, rulesYAML+"logins:\n  - {name: web, per_ip_user: 2/h}\n")
	req := &sluicepb.LoginRequest{Login: "web", User: "alice", Address: "192.0.2.1"}
	for i := range 2 {
		a, err := c.LoginBegin(ctx, req)
		if err != nil || !a.GetAllowed() || a.GetTicket() == "" {
			t.Fatalf("LoginBegin %d = %v, %v; want allowed with a ticket", i, a, err)
		}
		fail := &sluicepb.LoginRequest{Login: "web", User: "alice", Address: "192.0.2.1", Ticket: a.GetTicket()}
		for k := range 3 {
			if s, err := c.LoginFail(ctx, fail); err != nil || s.GetDuplicate() != (k > 0) {
				t.Fatalf("LoginFail %d = %v, %v; want duplicate %v", k, s, err, k > 0)
			}
		}
	}
	if a, err := c.LoginBegin(ctx, req); err != nil || a.GetAllowed() || a.GetRetryAfter().AsDuration() <= 0 {
		t.Errorf("LoginBegin after 2 failures of 2 = %v, %v; want refused with a wait", a, err)
	}
	for _, bad := range []*sluicepb.LoginRequest{
		{Login: "nope", User: "a", Address: "192.0.2.1"},
		{Login: "web", User: "a", Address: "somewhere"},
	} {
		if _, err := c.LoginBegin(ctx, bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("LoginBegin(%v) = %v, want InvalidArgument", bad, err)
		}
	}
	if _, err := c.LoginSucceed(ctx, &sluicepb.LoginRequest{Login: "web", User: "a", Address: "192.0.2.1", Ticket: "1.x.y"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("LoginSucceed with a bad ticket = %v, want InvalidArgument", err)
	}
}
