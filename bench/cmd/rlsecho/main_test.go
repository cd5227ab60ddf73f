package main

import (
	"context"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/rueidis"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/testing/rlstest"
	"github.com/sluicehq/sluice/internal/testing/servicetest"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/server"
)

// comparisonRule is the rule of the service comparison (docs/service.md).
const comparisonRule = `rules:
  - domain: edge
    descriptors:
      - key: remote_address
        rate_limit: {unit: minute, requests_per_unit: 1000}
store: {type: memory}
`

// TestSameReplyAsSluice checks the floor's premise: for the comparison's
// requests, of one and of three descriptors, the echo's reply is the one
// sluice serve gives an admitted request, field for field but for the
// remaining count and the time to the window's reset, which take as many
// bytes on the wire.
func TestSameReplyAsSluice(t *testing.T) {
	svc := servicetest.New(t, comparisonRule, server.Options{})
	sluice := pb.NewRateLimitServiceClient(rlstest.Serve(t, svc.RateLimitService()))
	echo := pb.NewRateLimitServiceClient(serveEcho(t, nil))
	for _, n := range []int{1, 3} {
		req := &pb.RateLimitRequest{Domain: "edge"}
		for range n {
			req.Descriptors = append(req.Descriptors, rlstest.Descriptor("remote_address=10.1.2.3"))
		}
		want := rlstest.ShouldRateLimit(t, sluice, req)
		got := rlstest.ShouldRateLimit(t, echo, req)
		for _, st := range want.Statuses {
			st.LimitRemaining = 999 // the first of 1000 a minute
			st.DurationUntilReset = durationpb.New(time.Minute)
		}
		if !proto.Equal(got, want) {
			t.Errorf("%d descriptors: echo replied\n%v\nsluice\n%v", n, got, want)
		}
		if gs, ws := proto.Size(got), proto.Size(want); gs != ws {
			t.Errorf("%d descriptors: echo's reply is %d bytes, sluice's %d", n, gs, ws)
		}
	}
}

// TestRedisCounts checks that with Redis the echo sends one INCR per
// descriptor before it answers, and that a dead Redis is Unavailable.
func TestRedisCounts(t *testing.T) {
	srv := testserver.StartRedis(t)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	echo := pb.NewRateLimitServiceClient(serveEcho(t, rc))
	req := &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{
		rlstest.Descriptor("remote_address=10.0.0.1"), rlstest.Descriptor("remote_address=10.0.0.2"),
	}}
	for range 3 {
		if resp := rlstest.ShouldRateLimit(t, echo, req); len(resp.Statuses) != 2 {
			t.Fatalf("reply of %d statuses, want 2", len(resp.Statuses))
		}
	}
	for _, key := range []string{"rlsecho:10.0.0.1", "rlsecho:10.0.0.2"} {
		n, err := rc.Do(t.Context(), rc.B().Get().Key(key).Build()).AsInt64()
		if err != nil || n != 3 {
			t.Errorf("GET %s = %d, %v; want 3", key, n, err)
		}
	}
	srv.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := echo.ShouldRateLimit(ctx, req); grpcstatus.Code(err) != codes.Unavailable {
		t.Errorf("with Redis stopped: %v, want Unavailable", err)
	}
}

// serveEcho serves the echo (counting in redis, if not nil) on a loopback
// port for the test, and returns a connection to it.
func serveEcho(t *testing.T, redis rueidis.Client) *grpc.ClientConn {
	return rlstest.ServeGRPC(t, newServer(redis))
}
