// Command rlsecho is the floor of the service comparison
// (docs/service.md): a gRPC server of Envoy's rate limit API that decides
// nothing. It answers every ShouldRateLimit with the reply sluice serve
// gives an admitted request of the comparison's rule (remote_address,
// 1000 a minute), one status per descriptor, so that the messages on the
// wire are the same size; what a server spends beyond rlsecho's CPU per
// call is its deciding.
//
//	rlsecho -listen 127.0.0.1:0
//
// It prints "rlsecho: grpc on ADDR" once it listens, and serves until
// interrupted. It uses grpc-go with sluice serve's pool of stream workers
// and no other option: the cheapest way grpc-go serves a call.
//
// With -redis ADDR it is the floor of a service on Redis: each call also
// sends one INCR per descriptor to Redis, through rueidis with sluice
// serve's client options (auto-pipelined), and waits for the replies. No
// limiter that keeps its state in Redis does less than touch one key per
// decision, and an INCR is the cheapest command Redis has that counts. Its counters, rlsecho:
// and the descriptor's first value, never expire: give it a Redis of its
// own.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/rueidis"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/server/envoyrls"
	sredis "github.com/sluicehq/sluice/store/redis"
)

// echo answers every request with one OK status per descriptor, after
// an INCR per descriptor if it has a Redis client.
type echo struct {
	pb.UnimplementedRateLimitServiceServer
	redis rueidis.Client
}

// status is the status sluice serve gives an admitted request of the
// comparison's rule.
func status() *pb.RateLimitResponse_DescriptorStatus {
	return &pb.RateLimitResponse_DescriptorStatus{
		Code: pb.RateLimitResponse_OK,
		CurrentLimit: &pb.RateLimitResponse_RateLimit{
			RequestsPerUnit: 1000, Unit: pb.RateLimitResponse_RateLimit_MINUTE,
		},
		LimitRemaining:     999,
		DurationUntilReset: durationpb.New(time.Minute),
	}
}

// ShouldRateLimit answers req as admitted, building the reply per call as
// a server does.
func (e echo) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	if e.redis != nil {
		if err := e.count(ctx, req); err != nil {
			return nil, grpcstatus.Error(codes.Unavailable, err.Error())
		}
	}
	resp := &pb.RateLimitResponse{
		OverallCode: pb.RateLimitResponse_OK,
		Statuses:    make([]*pb.RateLimitResponse_DescriptorStatus, len(req.GetDescriptors())),
	}
	for i := range resp.Statuses {
		resp.Statuses[i] = status()
	}
	return resp, nil
}

// count sends an INCR of each descriptor's first value, and waits for
// the replies.
func (e echo) count(ctx context.Context, req *pb.RateLimitRequest) error {
	ds := req.GetDescriptors()
	cmds := make(rueidis.Commands, len(ds))
	for i, d := range ds {
		key := "rlsecho:"
		if es := d.GetEntries(); len(es) > 0 {
			key += es[0].GetValue()
		}
		cmds[i] = e.redis.B().Incr().Key(key).Build()
	}
	for _, r := range e.redis.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return err
		}
	}
	return nil
}

// newServer returns the echo's gRPC server, counting in redis if it is
// not nil.
func newServer(redis rueidis.Client) *grpc.Server {
	g := grpc.NewServer(grpc.NumStreamWorkers(envoyrls.StreamWorkers))
	pb.RegisterRateLimitServiceServer(g, echo{redis: redis})
	return g
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve gRPC on")
	redisAddr := flag.String("redis", "", "Redis address to send an INCR per descriptor to (default none)")
	flag.Parse()
	var redis rueidis.Client
	if *redisAddr != "" {
		var err error
		redis, err = rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{*redisAddr}, DisableCache: true, MaxFlushDelay: sredis.MaxFlushDelay,
		})
		if err != nil {
			log.Fatal(err)
		}
		defer redis.Close()
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	g := newServer(redis)
	fmt.Printf("rlsecho: grpc on %s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		g.Stop()
	}()
	if err := g.Serve(ln); err != nil {
		log.Print(err)
	}
}
