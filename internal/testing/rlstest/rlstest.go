// Package rlstest serves and calls Envoy's rate limit service API
// (package envoyrls) in tests: a server of its own on a loopback port per
// test, a connection to it, and descriptors written as "key=value" pairs.
// ServeGRPC does the same for any gRPC server (sluice's own APIs, the
// interceptors' tests).
package rlstest

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/server/envoyrls"
)

// Listen serves s with envoyrls.NewServer on a loopback listener, stopped
// when the test ends, and returns its address.
func Listen(t testing.TB, s *envoyrls.Service) string {
	t.Helper()
	return ListenGRPC(t, envoyrls.NewServer(s))
}

// ListenGRPC serves g on a loopback listener, stopped when the test ends,
// and returns its address.
func ListenGRPC(t testing.TB, g *grpc.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}

// Serve serves s as Listen does and returns a connection to it; both are
// closed when the test ends.
func Serve(t testing.TB, s *envoyrls.Service) *grpc.ClientConn {
	t.Helper()
	return ServeGRPC(t, envoyrls.NewServer(s))
}

// ServeGRPC serves g as ListenGRPC does and returns a connection to it;
// both are closed when the test ends.
func ServeGRPC(t testing.TB, g *grpc.Server) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(ListenGRPC(t, g), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Descriptor builds a descriptor from "key=value" pairs.
func Descriptor(pairs ...string) *rlv3.RateLimitDescriptor {
	out := &rlv3.RateLimitDescriptor{}
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		out.Entries = append(out.Entries, &rlv3.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	return out
}

// ShouldRateLimit asks c, within 10 s, and fails the test on error.
func ShouldRateLimit(t testing.TB, c pb.RateLimitServiceClient, req *pb.RateLimitRequest) *pb.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v) error = %v", req, err)
	}
	return resp
}
