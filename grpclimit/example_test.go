package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/store/memory"
)

// Example limits each API key of a gRPC server to 2 calls a minute, with
// the interceptors in front of the standard health service, on a
// loopback port. The third call is refused with RESOURCE_EXHAUSTED and a
// RetryInfo that says when to come back, which gRPC clients' retry
// policies read. A fixed clock keeps the output stable; applications
// leave Clock nil.
func Example() {
	store := memory.New(memory.Config{})
	defer store.Close()
	at := func() time.Time { return time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) }
	perKey, err := sluice.New(store, sluice.Config{Action: "rpc", Limits: []sluice.Limit{sluice.PerMinute(2)}, Clock: at})
	if err != nil {
		fmt.Println(err)
		return
	}
	lim, err := grpclimit.New(grpclimit.Config{Rules: []grpclimit.Rule{
		{Name: "per-key", Limiter: perKey, Key: grpclimit.Metadata("x-api-key")},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(lim.Unary()), grpc.ChainStreamInterceptor(lim.Stream()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	go srv.Serve(ln)
	defer srv.Stop()

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	c := healthpb.NewHealthClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "key-1")
	for range 3 {
		_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
		st := status.Convert(err)
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				fmt.Printf("%v, retry in %v\n", st.Code(), ri.RetryDelay.AsDuration())
			}
		}
		if err == nil {
			fmt.Println("OK")
		}
	}
	// Output:
	// OK
	// OK
	// ResourceExhausted, retry in 30s
}
