package client

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/wire"
)

// checkGRPC asks Envoy's API of the service about a check of a named
// rule: the rule is the domain and the key the value of a descriptor of
// one entry, as the service's rules engine reads a named rule; the cost
// is hits_addend, and a peek a descriptor hits_addend of 0, which Envoy's
// API defines only for a cost of 1.
func (c *Client) checkGRPC(ctx context.Context, req wire.CheckRequest) (sluice.Decision, error) {
	if req.Cost > math.MaxUint32 || (req.Peek && req.Cost > 1) {
		return sluice.Decision{}, fmt.Errorf("client: %w: Envoy's API cannot peek at or take a cost of %d", sluice.ErrInvalidRequest, req.Cost)
	}
	desc := &rlv3.RateLimitDescriptor{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "key", Value: req.Key}}}
	if req.Peek {
		desc.HitsAddend = wrapperspb.UInt64(0)
	}
	c.roundTrips.Add(1)
	var md metadata.MD
	resp, err := c.rls.ShouldRateLimit(ctx, &pb.RateLimitRequest{
		Domain:      req.Rule,
		Descriptors: []*rlv3.RateLimitDescriptor{desc},
		HitsAddend:  uint32(req.Cost),
	}, grpc.Header(&md))
	if err != nil {
		if status.Code(err) == codes.InvalidArgument {
			return sluice.Decision{}, fmt.Errorf("client: %w: %v", sluice.ErrInvalidRequest, status.Convert(err).Message())
		}
		if ctx.Err() != nil { // a status does not wrap the context's error
			err = fmt.Errorf("%w: %v", ctx.Err(), err)
		}
		return sluice.Decision{}, c.unavailable(err)
	}
	if len(resp.GetStatuses()) != 1 {
		return sluice.Decision{}, c.unavailable(fmt.Errorf("%d statuses for one descriptor", len(resp.GetStatuses())))
	}
	st := resp.GetStatuses()[0]
	if st.GetCurrentLimit() == nil && st.GetLimitRemaining() == 0 && st.GetCode() == pb.RateLimitResponse_OK {
		// Envoy's API allows a domain it does not know, where the HTTP
		// API refuses an unknown rule: say so, as the HTTP API does.
		return sluice.Decision{}, fmt.Errorf("client: %w: unknown rule %q", sluice.ErrInvalidRequest, req.Rule)
	}
	d := sluice.Decision{
		Allowed:    resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT,
		Limit:      limitOf(st.GetCurrentLimit()),
		Remaining:  int(st.GetLimitRemaining()),
		ResetAfter: st.GetDurationUntilReset().AsDuration(),
	}
	switch {
	case req.Peek:
		// A descriptor of zero hits is never over the limit: Envoy's API
		// tells what is left, one more than a take would leave.
		d.Allowed, d.Remaining = d.Remaining > 0, max(d.Remaining-1, 0)
	case !d.Allowed:
		d.RetryAfter = retryAfter(md, resp)
	}
	return d, nil
}

// limitOf reads Envoy's current limit: its rate per unit (times the unit
// multiplier). Envoy's units carry no algorithm nor burst: the Limit has
// the default ones. A limit no unit expresses carries sluice's policy
// as its name.
func limitOf(cl *pb.RateLimitResponse_RateLimit) sluice.Limit {
	if cl == nil {
		return sluice.Limit{}
	}
	if cl.GetUnit() == pb.RateLimitResponse_RateLimit_UNKNOWN {
		if l, err := sluice.ParseLimit(cl.GetName()); err == nil {
			return l
		}
	}
	period := wire.EnvoyUnit(cl.GetUnit()).Period()
	if m := cl.GetUnitMultiplier(); m != nil && m.GetValue() > 1 {
		period *= time.Duration(m.GetValue())
	}
	return sluice.Limit{Rate: int(cl.GetRequestsPerUnit()), Period: period}
}

// retryAfter reads the wait of a denial: from the metadata
// wire.RetryAfterKey, which sluice serve sends with every denial (to the
// millisecond), else from the Retry-After header field the service asks
// Envoy to add when it runs with -grpc-headers (whole seconds, rounded
// up: what a server of envoyproxy/ratelimit's kind may give); 0 without
// either.
func retryAfter(md metadata.MD, resp *pb.RateLimitResponse) time.Duration {
	if v := md.Get(wire.RetryAfterKey); len(v) == 1 {
		if d, ok := wire.ParseSeconds(v[0]); ok {
			return d
		}
	}
	for _, h := range resp.GetResponseHeadersToAdd() {
		if strings.EqualFold(h.GetKey(), "Retry-After") {
			if s, err := strconv.ParseInt(h.GetValue(), 10, 32); err == nil && s > 0 {
				return time.Duration(s) * time.Second
			}
		}
	}
	return 0
}
