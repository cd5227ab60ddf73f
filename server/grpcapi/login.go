package grpcapi

import (
	"context"
	"errors"
	"net/netip"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/wire/sluicepb"
)

// attempt returns the login rule and the try req names.
func (s *Service) attempt(req *sluicepb.LoginRequest) (*guard.Login, guard.Try, error) {
	l := s.logins()[req.GetLogin()]
	if l == nil {
		return nil, guard.Try{}, status.Errorf(codes.InvalidArgument, "unknown login %q", req.GetLogin())
	}
	ip, err := netip.ParseAddr(req.GetAddress())
	if err != nil {
		return nil, guard.Try{}, status.Errorf(codes.InvalidArgument, "address %q is not an IP address", req.GetAddress())
	}
	return l, guard.Try{IP: ip, Username: req.GetUser(), CaptchaSolved: req.GetCaptchaSolved()}, nil
}

// LoginBegin begins an attempt of a login rule.
func (s *Service) LoginBegin(ctx context.Context, req *sluicepb.LoginRequest) (*sluicepb.LoginResponse, error) {
	l, try, err := s.attempt(req)
	if err != nil {
		return nil, err
	}
	a, err := l.Begin(ctx, try)
	if err != nil {
		return nil, s.fail(ctx, "login "+req.GetLogin(), err)
	}
	out := &sluicepb.LoginResponse{Allowed: a.Allowed, Delay: durationpb.New(a.Delay), RetryAfter: durationpb.New(a.RetryAfter),
		Captcha: a.Captcha, KnownGood: a.KnownGood, Reason: a.Reason}
	if a.Guard != guard.Pass {
		out.Guard = a.Guard.String()
	}
	if a.Allowed {
		out.Ticket = a.Ticket().String()
	}
	return out, nil
}

// LoginFail settles an attempt as failed.
func (s *Service) LoginFail(ctx context.Context, req *sluicepb.LoginRequest) (*sluicepb.SettleResponse, error) {
	return s.settle(ctx, req, (*guard.Login).Fail)
}

// LoginSucceed settles an attempt as succeeded.
func (s *Service) LoginSucceed(ctx context.Context, req *sluicepb.LoginRequest) (*sluicepb.SettleResponse, error) {
	return s.settle(ctx, req, (*guard.Login).Succeed)
}

// settle settles the attempt of req's ticket with end: (*guard.Login).Fail
// or Succeed.
func (s *Service) settle(ctx context.Context, req *sluicepb.LoginRequest, end guard.Ending) (*sluicepb.SettleResponse, error) {
	l, try, err := s.attempt(req)
	if err != nil {
		return nil, err
	}
	st, err := end(l, ctx, try, req.GetTicket())
	if errors.Is(err, sluice.ErrInvalidRequest) {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	} else if err != nil {
		return nil, s.fail(ctx, "login "+req.GetLogin(), err)
	}
	out := &sluicepb.SettleResponse{Duplicate: st.Duplicate, Banned: st.Banned}
	if st.Banned {
		out.Ban = durationpb.New(st.Ban.Until.Sub(st.Ban.Since))
	}
	return out, nil
}
