package client

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/wire"
)

// TestRetryAfter checks where a gRPC denial's wait is read: sluice's
// metadata first, to the millisecond, then the Retry-After field a
// server asks Envoy to add, in whole seconds; none is no wait.
func TestRetryAfter(t *testing.T) {
	header := &pb.RateLimitResponse{ResponseHeadersToAdd: []*corev3.HeaderValue{{Key: "Retry-After", Value: "12"}}}
	for _, tt := range []struct {
		name string
		md   metadata.MD
		resp *pb.RateLimitResponse
		want time.Duration
	}{
		{"metadata", metadata.Pairs(wire.RetryAfterKey, "11.988"), &pb.RateLimitResponse{}, 11988 * time.Millisecond},
		{"metadata first", metadata.Pairs(wire.RetryAfterKey, "11.988"), header, 11988 * time.Millisecond},
		{"header", nil, header, 12 * time.Second},
		{"bad metadata", metadata.Pairs(wire.RetryAfterKey, "soon"), header, 12 * time.Second},
		{"negative metadata", metadata.Pairs(wire.RetryAfterKey, "-1"), &pb.RateLimitResponse{}, 0},
		{"none", nil, &pb.RateLimitResponse{}, 0},
	} {
		if got := retryAfter(tt.md, tt.resp); got != tt.want {
			t.Errorf("%s: retryAfter = %v, want %v", tt.name, got, tt.want)
		}
	}
}
