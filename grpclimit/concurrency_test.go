package grpclimit_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/store/memory"
)

func newConcurrency(t *testing.T, limit int) *sluice.Concurrency {
	t.Helper()
	st := memory.New(memory.Config{})
	t.Cleanup(func() { st.Close() })
	c, err := sluice.NewConcurrency(st, sluice.ConcurrencyConfig{Limit: limit, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConcurrencyStreams: two open streams take both places of a limit
// of 2; a third stream and a unary call are refused with
// RESOURCE_EXHAUSTED, RetryInfo and retry-after; when a stream ends its
// place is free again.
func TestConcurrencyStreams(t *testing.T) {
	con := newConcurrency(t, 2)
	ic, err := grpclimit.NewConcurrency(grpclimit.ConcurrencyConfig{Limiter: con})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, ic)
	var cancels []context.CancelFunc
	for i := range 2 {
		ctx, cancel := context.WithCancel(t.Context())
		cancels = append(cancels, cancel)
		s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	s, err := c.Watch(t.Context(), &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("third stream: %v, want RESOURCE_EXHAUSTED", err)
	}
	var trailer metadata.MD
	_, err = c.Check(t.Context(), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || len(st.Details()) != 1 || trailer.Get("retry-after")[0] != "60" {
		t.Errorf("unary call over the limit: %v, details %v, trailer %v; want RESOURCE_EXHAUSTED, RetryInfo, retry-after 60", err, st.Details(), trailer)
	} else if ri, ok := st.Details()[0].(*errdetails.RetryInfo); !ok || ri.RetryDelay.AsDuration() <= 55*time.Second || ri.RetryDelay.AsDuration() > time.Minute {
		t.Errorf("detail %v, want RetryInfo of the minute the first lease has left", st.Details()[0])
	}
	cancels[0]()
	for i := 0; ; i++ { // the server sees the cancellation soon after
		_, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{})
		if err == nil {
			break
		}
		if i == 200 {
			t.Fatalf("no place freed 2s after a stream ended: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // polling the server, which ends the stream on its own goroutine
	}
	cancels[1]()
}

// TestConcurrencyClassMetadata: a critical call (by metadata a proxy
// set) gets the reserve a default call may not use.
func TestConcurrencyClassMetadata(t *testing.T) {
	con := newConcurrency(t, 5)
	ic, err := grpclimit.NewConcurrency(grpclimit.ConcurrencyConfig{Limiter: con, Class: grpclimit.ClassFromMetadata("priority-class")})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, ic)
	for range 4 {
		s, err := c.Watch(t.Context(), &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("default call at 4 of 5: %v, want RESOURCE_EXHAUSTED", err)
	}
	ctx := metadata.AppendToOutgoingContext(t.Context(), "priority-class", "critical")
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("critical call at 4 of 5: %v, want through", err)
	}
}
