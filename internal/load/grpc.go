package load

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"sync/atomic"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// grpcClient asks Envoy's rate limit API over Conns connections, in turn.
type grpcClient struct {
	conns   []*grpc.ClientConn
	clients []pb.RateLimitServiceClient
	next    atomic.Uint64
	cfg     Config
}

func newGRPC(addr string, cfg Config, secure bool) (*grpcClient, error) {
	c := &grpcClient{cfg: cfg}
	creds := insecure.NewCredentials()
	if secure {
		creds = credentials.NewTLS(cmp.Or(cfg.TLS, &tls.Config{}))
	}
	for range cfg.Conns {
		// Each ClientConn is its own HTTP/2 connection.
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			c.close()
			return nil, fmt.Errorf("load: %w", err)
		}
		c.conns = append(c.conns, conn)
		c.clients = append(c.clients, pb.NewRateLimitServiceClient(conn))
	}
	return c, nil
}

// rlsRequest is Envoy's request of cfg for key, as gRPC and /json send
// it.
func rlsRequest(cfg Config, key string) *pb.RateLimitRequest {
	req := &pb.RateLimitRequest{Domain: cfg.Domain, HitsAddend: uint32(cfg.Hits)}
	for _, d := range cfg.Descriptors {
		es, _ := parseDescriptor(d, key) // checked by withDefaults
		desc := &rlv3.RateLimitDescriptor{}
		for _, e := range es {
			desc.Entries = append(desc.Entries, &rlv3.RateLimitDescriptor_Entry{Key: e.key, Value: e.value})
		}
		req.Descriptors = append(req.Descriptors, desc)
	}
	return req
}

func (c *grpcClient) do(ctx context.Context, key string) (bool, error) {
	cl := c.clients[c.next.Add(1)%uint64(len(c.clients))]
	resp, err := cl.ShouldRateLimit(ctx, rlsRequest(c.cfg, key))
	if err != nil {
		return false, err
	}
	return resp.GetOverallCode() == pb.RateLimitResponse_OK, nil
}

func (c *grpcClient) close() error {
	for _, conn := range c.conns {
		conn.Close()
	}
	return nil
}
