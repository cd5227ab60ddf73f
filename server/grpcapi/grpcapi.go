// Package grpcapi is the sluice gRPC API of sluice serve (service
// sluice.v1.Limits, in sluicepb): insert, and the outcome calls
// (reserve, commit, refund, report), on the named rules of the service's
// configuration; and the login calls (LoginBegin, LoginFail,
// LoginSucceed) on its login rules. It does what the HTTP JSON API's /v1/insert and outcome
// endpoints do, through the same rules engine: the logic is the engine's
// (rules.Engine.Check, Reserve, Settle, Report); this package only
// translates messages and errors. Checks are Envoy's rate limit API
// (package server/envoyrls), served on the same gRPC listener.
//
// Errors: INVALID_ARGUMENT for a request the client got wrong (an unknown
// rule, no key or id, a cost out of bounds, an unknown outcome),
// FAILED_PRECONDITION for a commit or refund of an unknown or expired
// reservation, UNAVAILABLE when the store failed (details go to the log),
// CANCELED or DEADLINE_EXCEEDED when the client gave up.
package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/wire/sluicepb"
)

// Service serves sluice.v1.Limits over the engine Engine returns (the
// current one: a reload replaces it).
type Service struct {
	sluicepb.UnimplementedLimitsServer
	engine func() *rules.Engine
	logins func() map[string]*guard.Login
	log    *slog.Logger
}

// New returns the service over the engine and the login rules that
// engine and logins return (the current ones: a reload replaces them);
// log gets store failures (nil: slog.Default()).
func New(engine func() *rules.Engine, logins func() map[string]*guard.Login, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{engine: engine, logins: logins, log: log}
}

// Register registers s on g.
func (s *Service) Register(g *grpc.Server) { sluicepb.RegisterLimitsServer(g, s) }

// Insert counts req.Cost on the rule for the key whether or not it fits.
func (s *Service) Insert(ctx context.Context, req *sluicepb.InsertRequest) (*sluicepb.Decision, error) {
	e := s.engine()
	switch {
	case !e.IsNamed(req.GetRule()):
		return nil, status.Errorf(codes.InvalidArgument, "unknown rule %q (want one of %v)", req.GetRule(), e.Names())
	case req.GetKey() == "":
		return nil, status.Error(codes.InvalidArgument, "key is required")
	case req.GetCost() == 0 || req.GetCost() > 1<<31 || req.GetCost() < -1<<31:
		return nil, status.Errorf(codes.InvalidArgument, "cost %d: give a non-zero cost within the rule's burst", req.GetCost())
	}
	res, err := e.Check(ctx, rules.Request{Domain: req.GetRule(), Descriptors: []rules.Descriptor{rules.Key(req.GetKey())},
		Op: sluice.OpInsert, Cost: int(req.GetCost())})
	if err != nil {
		return nil, s.fail(ctx, req.GetRule(), err)
	}
	st := res.Statuses[0]
	if st.Err != nil {
		return nil, status.Error(codes.InvalidArgument, st.Err.Error())
	}
	return decision(req.GetRule(), st), nil
}

// Reserve takes the cost and holds it awaiting Commit or Refund.
func (s *Service) Reserve(ctx context.Context, req *sluicepb.OutcomeRequest) (*sluicepb.OutcomeResponse, error) {
	return s.outcome(ctx, req, func(e *rules.Engine, o rules.OutcomeRequest) (rules.OutcomeResult, error) { return e.Reserve(ctx, o) })
}

// Commit keeps a reserved take.
func (s *Service) Commit(ctx context.Context, req *sluicepb.OutcomeRequest) (*sluicepb.OutcomeResponse, error) {
	return s.outcome(ctx, req, func(e *rules.Engine, o rules.OutcomeRequest) (rules.OutcomeResult, error) {
		return e.Commit(ctx, o)
	})
}

// Refund gives a reserved take back.
func (s *Service) Refund(ctx context.Context, req *sluicepb.OutcomeRequest) (*sluicepb.OutcomeResponse, error) {
	return s.outcome(ctx, req, func(e *rules.Engine, o rules.OutcomeRequest) (rules.OutcomeResult, error) {
		return e.Refund(ctx, o)
	})
}

// outcome reads req, asks call of the current engine, and renders its
// answer: what every outcome call does but the engine's method.
func (s *Service) outcome(ctx context.Context, req *sluicepb.OutcomeRequest, call func(*rules.Engine, rules.OutcomeRequest) (rules.OutcomeResult, error)) (*sluicepb.OutcomeResponse, error) {
	o, err := outcomeRequest(req)
	if err != nil {
		return nil, err
	}
	res, err := call(s.engine(), o)
	return s.answer(ctx, o.Rule, res, err)
}

// outcomes names the outcomes Report takes.
var outcomes = map[sluicepb.Outcome]string{sluicepb.Outcome_OUTCOME_FAILURE: "failure", sluicepb.Outcome_OUTCOME_SUCCESS: "success"}

// Report reports the outcome of unreserved work.
func (s *Service) Report(ctx context.Context, req *sluicepb.OutcomeRequest) (*sluicepb.OutcomeResponse, error) {
	outcome, ok := outcomes[req.GetOutcome()]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "unknown outcome %v (want OUTCOME_FAILURE or OUTCOME_SUCCESS)", req.GetOutcome())
	}
	return s.outcome(ctx, req, func(e *rules.Engine, o rules.OutcomeRequest) (rules.OutcomeResult, error) {
		return e.Report(ctx, o, outcome)
	})
}

// outcomeRequest is the engine's form of req; the engine checks the rest.
func outcomeRequest(req *sluicepb.OutcomeRequest) (rules.OutcomeRequest, error) {
	if c := req.GetCost(); c < 0 || c > 1<<31 {
		return rules.OutcomeRequest{}, status.Errorf(codes.InvalidArgument, "cost %d: give 0 (for 1) up to the rule's burst", c)
	}
	return rules.OutcomeRequest{Rule: req.GetRule(), Key: req.GetKey(), Cost: int(req.GetCost()), ID: req.GetId()}, nil
}

// answer renders the engine's answer to an outcome call, or its error.
func (s *Service) answer(ctx context.Context, rule string, res rules.OutcomeResult, err error) (*sluicepb.OutcomeResponse, error) {
	if err != nil {
		return nil, s.fail(ctx, rule, err)
	}
	out := &sluicepb.OutcomeResponse{Decision: decision(rule, res.Status), Duplicate: res.Duplicate}
	if !res.Expires.IsZero() {
		out.Expires = timestamppb.New(res.Expires)
	}
	return out, nil
}

// decision renders a status of rule.
func decision(rule string, st rules.Status) *sluicepb.Decision {
	d := st.Verdict()
	out := &sluicepb.Decision{Allowed: d.Allowed, Rule: rule, Shadowed: st.Shadowed}
	if st.Guard != guard.Pass {
		out.Guard = st.Guard.String()
	}
	if st.Guard == guard.Exempt {
		return out
	}
	out.Limit, out.Policy, out.Remaining = int64(d.Limit.Rate), d.Limit.String(), int64(max(d.Remaining, 0))
	out.ResetAfter, out.RetryAfter = durationpb.New(d.ResetAfter), durationpb.New(d.RetryAfter)
	return out
}

// fail turns an engine error into the call's status.
func (s *Service) fail(ctx context.Context, rule string, err error) error {
	switch {
	case errors.Is(err, rules.ErrNoReservation):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, sluice.ErrInvalidRequest), errors.Is(err, sluice.ErrCostExceedsBurst), errors.Is(err, rules.ErrUnknownDomain):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "request cancelled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	}
	s.log.ErrorContext(ctx, "store failed", "rule", rule, "err", err)
	return status.Error(codes.Unavailable, fmt.Sprintf("the store failed to decide rule %q; try again", rule))
}
