package leaseapi

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/wire/sluicepb"
)

// GRPC is the gRPC service sluice.v1.Leases over the Leases of the
// configuration in force.
type GRPC struct {
	sluicepb.UnimplementedLeasesServer
	leases func() *Leases
}

// NewGRPC returns the gRPC service; leases returns the Leases of the
// configuration in force.
func NewGRPC(leases func() *Leases) *GRPC { return &GRPC{leases: leases} }

// Register registers the service with g.
func (s *GRPC) Register(g grpc.ServiceRegistrar) { sluicepb.RegisterLeasesServer(g, s) }

// Acquire implements sluicepb.LeasesServer.
func (s *GRPC) Acquire(ctx context.Context, req *sluicepb.AcquireRequest) (*sluicepb.LeaseResponse, error) {
	cl, err := sluice.ParseClass(req.GetClass())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	wait := req.GetWait().AsDuration()
	if wait < 0 || req.GetWait() != nil && req.GetWait().CheckValid() != nil {
		return nil, status.Errorf(codes.InvalidArgument, "wait %v: want 0 or more", req.GetWait())
	}
	res, err := s.leases().Acquire(ctx, AcquireRequest{Rule: req.GetRule(), Key: req.GetKey(), Class: cl, Wait: wait})
	return grpcResponse(res, err)
}

// Release implements sluicepb.LeasesServer.
func (s *GRPC) Release(ctx context.Context, req *sluicepb.LeaseRef) (*sluicepb.LeaseResponse, error) {
	return grpcResponse(s.leases().Release(ctx, req.GetRule(), req.GetKey(), req.GetId()))
}

// Extend implements sluicepb.LeasesServer.
func (s *GRPC) Extend(ctx context.Context, req *sluicepb.LeaseRef) (*sluicepb.LeaseResponse, error) {
	return grpcResponse(s.leases().Extend(ctx, req.GetRule(), req.GetKey(), req.GetId()))
}

func grpcResponse(res Result, err error) (*sluicepb.LeaseResponse, error) {
	if err != nil {
		code, msg := errorStatus(err)
		if code == http.StatusBadRequest {
			return nil, status.Error(codes.InvalidArgument, msg)
		}
		if errors.Is(err, context.Canceled) {
			return nil, status.Error(codes.Canceled, msg)
		}
		return nil, status.Error(codes.Unavailable, msg)
	}
	out := &sluicepb.LeaseResponse{Ok: res.OK, Rule: res.Rule, Id: res.ID, InUse: int64(res.InUse), Limit: int64(res.Limit)}
	if res.Guard != guard.Pass {
		out.Guard = res.Guard.String()
	}
	if !res.Expires.IsZero() {
		out.Expires = timestamppb.New(res.Expires)
	}
	if res.RetryAfter > 0 {
		out.RetryAfter = durationpb.New(res.RetryAfter)
	}
	return out, nil
}
