package envoyrls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/ratelimitheader"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/wire"
)

// DefaultMaxMessageBytes bounds a request message on the server NewServer
// builds: a request of the engine's most descriptors fits many times over.
const DefaultMaxMessageBytes = 1 << 20

// Config configures a Service. The zero value of each field but Engine
// means its default.
type Config struct {
	// Engine returns the engine that decides each request: the current
	// one, so that a reload takes effect at the next request. Required.
	Engine func() *rules.Engine
	// ResponseHeaders adds the IETF RateLimit fields (RateLimit-Policy,
	// RateLimit, and Retry-After when over the limit) of the descriptor
	// closest to its limit to every response, for Envoy to pass to the
	// client. Default false, as in envoyproxy/ratelimit.
	ResponseHeaders bool
	// Logger receives store failures. Default slog.Default().
	Logger *slog.Logger
}

// A Service is Envoy's rate limit service, v3
// (envoy.service.ratelimit.v3.RateLimitService), answered by a
// [rules.Engine]. Create Services with New; the zero value is not usable.
// A Service is safe for concurrent use.
type Service struct {
	pb.UnimplementedRateLimitServiceServer
	engine  func() *rules.Engine
	headers bool
	log     *slog.Logger
}

var _ pb.RateLimitServiceServer = (*Service)(nil)

// New returns a Service for c.
func New(c Config) (*Service, error) {
	if c.Engine == nil {
		return nil, fmt.Errorf("envoyrls: %w: no engine", sluice.ErrInvalidRequest)
	}
	s := &Service{engine: c.Engine, headers: c.ResponseHeaders, log: c.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s, nil
}

// Bounds of a server from NewServer, so that slow, silent and greedy
// clients cost it a bounded amount.
const (
	// HandshakeTimeout bounds how long a new connection may take to
	// complete its handshake (HTTP/2 preface and settings): a client that
	// connects and says nothing is dropped.
	HandshakeTimeout = 5 * time.Second
	// MaxConcurrentStreams bounds the calls in flight on one connection.
	MaxConcurrentStreams = 256
	// MaxHeaderListBytes bounds the headers of a call.
	MaxHeaderListBytes = 64 << 10
	// IdleTimeout closes a connection with no call for this long.
	IdleTimeout = 5 * time.Minute
	// MinPingInterval is the shortest interval at which a client may
	// send keepalive pings; one that pings more often is sent away
	// (GOAWAY, too_many_pings), as are pings on a connection without
	// calls.
	MinPingInterval = 10 * time.Second
)

// NewServer returns a gRPC server with s and the standard health service
// (reporting SERVING) registered, hardened against slow and greedy
// clients: messages of at most DefaultMaxMessageBytes, the bounds above
// (a handshake timeout, concurrent streams and header size per
// connection, idle connections closed, keepalive pings enforced), and
// calls served on a pool of StreamWorkers goroutines. Extra options are
// applied after these.
func NewServer(s *Service, opts ...grpc.ServerOption) *grpc.Server {
	g := grpc.NewServer(append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(DefaultMaxMessageBytes),
		grpc.MaxSendMsgSize(DefaultMaxMessageBytes),
		grpc.ConnectionTimeout(HandshakeTimeout),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.MaxHeaderListSize(MaxHeaderListBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: MinPingInterval}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: IdleTimeout, Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.NumStreamWorkers(StreamWorkers),
	}, opts...)...)
	pb.RegisterRateLimitServiceServer(g, s)
	h := health.NewServer()
	h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	h.SetServingStatus(pb.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, h)
	return g
}

// StreamWorkers is the number of goroutines a server from NewServer keeps
// to serve calls: reused, their stacks stay grown, where a goroutine per
// call grew its stack on every call (a fifth of the server's CPU in a
// profile under load). A call that finds every worker busy gets a
// goroutine of its own, as without the pool.
const StreamWorkers = 64

// ShouldRateLimit decides every descriptor of req under its domain, as
// envoyproxy/ratelimit does: OVER_LIMIT when a descriptor of an enforced
// rule is over its limit. A domain the configuration does not know is
// answered OK with no limits, as Envoy's service does; a malformed
// request (no domain, no descriptors, more than the engine's bound, an
// empty descriptor, negative hits) is InvalidArgument, and a store
// failure Unavailable, which Envoy's failure_mode_deny setting turns
// into an admission or a denial.
func (s *Service) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	if req.GetDomain() == "" {
		return nil, status.Error(codes.InvalidArgument, "domain is required")
	}
	e := s.engine()
	// The descriptors and statuses of a request of a few (the common
	// case: one) stay on the stack: the engine keeps nothing of them,
	// and the response copies what it shows.
	var descBuf [2]rules.Descriptor
	var stBuf [2]rules.Status
	r := rules.Request{Domain: req.GetDomain(), Descriptors: descBuf[:0], Cost: int(req.GetHitsAddend())}
	for i, d := range req.GetDescriptors() {
		out, err := descriptor(d)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "descriptor %d: %v", i, err)
		}
		r.Descriptors = append(r.Descriptors, out)
	}
	res := rules.Result{Statuses: stBuf[:0]}
	err := e.CheckInto(ctx, r, &res)
	switch {
	case errors.Is(err, rules.ErrUnknownDomain) && len(r.Descriptors) > 0:
		return unknownDomain(len(r.Descriptors)), nil
	case errors.Is(err, sluice.ErrInvalidRequest):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	case err != nil:
		s.log.ErrorContext(ctx, "store failed", "domain", req.GetDomain(), "err", err)
		return nil, status.Error(codes.Unavailable, "the store failed to decide; try again")
	}
	resp, wait := s.response(res)
	if wait > 0 {
		// For sluice's clients, whose denial cache needs the wait, which
		// Envoy's protobuf has no field for (a call that is not gRPC's,
		// /json's, has no metadata to set: the error says so).
		_ = grpc.SetHeader(ctx, metadata.Pairs(wire.RetryAfterKey, wire.FormatSeconds(wait)))
	}
	return resp, nil
}

// descriptor converts an Envoy descriptor. (One of a named rule gives the
// actor's key as the value of its one entry, which the engine, that
// knows the domain, types: see rules.Descriptor.)
func descriptor(d *rlv3.RateLimitDescriptor) (out rules.Descriptor, err error) {
	out.Entries = make([]rules.Entry, len(d.GetEntries()))
	for i, e := range d.GetEntries() {
		out.Entries[i] = rules.Entry{Key: e.GetKey(), Value: e.GetValue()}
	}
	if d.GetIsNegativeHits() {
		return out, errors.New("negative hits are not supported")
	}
	if h := d.GetHitsAddend(); h != nil {
		switch v := h.GetValue(); {
		case v == 0:
			out.NoHits = true
		case v > math.MaxInt32:
			return out, fmt.Errorf("hits_addend %d is too large", v)
		default:
			out.Cost = int(v)
		}
	}
	if o := d.GetLimit(); o != nil {
		l, err := overrideLimit(o)
		if err != nil {
			return out, err
		}
		out.Override = &l
	}
	return out, nil
}

// overrideLimit converts Envoy's limit override into the fixed window
// Envoy's service applies for it.
func overrideLimit(o *rlv3.RateLimitDescriptor_RateLimitOverride) (sluice.Limit, error) {
	unit := wire.EnvoyUnit(o.GetUnit()).Period()
	if unit == 0 {
		return sluice.Limit{}, fmt.Errorf("limit override: unknown unit %v", o.GetUnit())
	}
	if m := o.GetUnitMultiplier(); m != nil && m.GetValue() > 1 {
		unit *= time.Duration(m.GetValue())
	}
	if o.GetRequestsPerUnit() == 0 || o.GetRequestsPerUnit() > math.MaxInt32 {
		return sluice.Limit{}, fmt.Errorf("limit override: requests_per_unit %d", o.GetRequestsPerUnit())
	}
	return sluice.Limit{Rate: int(o.GetRequestsPerUnit()), Period: unit, Algorithm: sluice.FixedWindow}, nil
}

// unknownDomain is Envoy's answer for a domain it does not know: OK, and
// an OK status without a limit for every descriptor.
func unknownDomain(n int) *pb.RateLimitResponse {
	resp := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK, Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, n)}
	for i := range resp.Statuses {
		resp.Statuses[i] = &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK}
	}
	return resp
}

// response converts an engine's result, and returns the wait of a
// denial (0 when allowed, or refused by the deny list, which has none).
func (s *Service) response(res rules.Result) (*pb.RateLimitResponse, time.Duration) {
	resp := &pb.RateLimitResponse{
		OverallCode: pb.RateLimitResponse_OK,
		Statuses:    make([]*pb.RateLimitResponse_DescriptorStatus, len(res.Statuses)),
	}
	if !res.Allowed {
		resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
	}
	bind := -1
	for i, st := range res.Statuses {
		ds := &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK}
		resp.Statuses[i] = ds
		if !st.Allowed {
			ds.Code = pb.RateLimitResponse_OVER_LIMIT
		}
		ru := st.Rule
		if ru == nil {
			continue
		}
		if ru.Unlimited || st.Guard == guard.Exempt {
			ds.LimitRemaining = math.MaxUint32
			continue
		}
		d := st.Decision
		ds.CurrentLimit = currentLimit(ru, d.Limit)
		ds.LimitRemaining = uint32(min(max(d.Remaining, 0), math.MaxUint32))
		ds.DurationUntilReset = durationpb.New(time.Duration(ratelimitheader.CeilSeconds(d.ResetAfter)) * time.Second)
		if bind < 0 || st.Verdict().Binds(res.Statuses[bind].Verdict()) {
			bind = i
		}
	}
	if bind < 0 || res.Statuses[bind].Guard == guard.Refuse {
		return resp, 0
	}
	st := res.Statuses[bind]
	var wait time.Duration
	if !res.Allowed {
		wait = st.Verdict().RetryAfter
	}
	if s.headers {
		rl, ra := st.Rule.Fields(st.Verdict())
		resp.ResponseHeadersToAdd = []*corev3.HeaderValue{
			{Key: "RateLimit-Policy", Value: st.Rule.Policy()},
			{Key: "RateLimit", Value: rl},
		}
		if ra != "" && !res.Allowed {
			resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd, &corev3.HeaderValue{Key: "Retry-After", Value: ra})
		}
	}
	return resp, wait
}

// currentLimit describes limit l of rule ru in Envoy's terms: its rate
// per the longest unit that divides its period, with a unit multiplier
// for periods such as 5 minutes, and the rule's name (or its policy in
// sluice's syntax, for limits Envoy's units cannot express, such as a
// period of 1500 ms).
func currentLimit(ru *rules.Rule, l sluice.Limit) *pb.RateLimitResponse_RateLimit {
	out := &pb.RateLimitResponse_RateLimit{Name: ru.Name, RequestsPerUnit: uint32(min(l.Rate, math.MaxUint32))}
	if u, m := wire.EnvoyUnitOf(l.Period); u != wire.EnvoyUnknown {
		out.Unit = pb.RateLimitResponse_RateLimit_Unit(u)
		if m > 1 {
			out.UnitMultiplier = wrapperspb.UInt32(uint32(min(m, math.MaxUint32)))
		}
		return out
	}
	if out.Name == "" {
		out.Name = l.String()
	}
	return out
}
