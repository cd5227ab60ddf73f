package rlqs_test

import (
	"fmt"
	"testing"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/testing/rlstest"
	"github.com/sluicehq/sluice/server/envoyrls"
)

// rawCodec sends the bytes it is given as they are: a client that speaks
// gRPC but sends garbage for messages.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("rawCodec: %T", v)
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

// TestProtocolGarbage: a stream whose message is not a usage report is
// ended with a status, on the gRPC listener sluice serve uses, and the
// server goes on serving.
func TestProtocolGarbage(t *testing.T) {
	svc, q := newService(t)
	g := envoyrls.NewServer(svc.RateLimitService())
	q.Register(g)
	addr := rlstest.ListenGRPC(t, g)
	raw, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	desc := &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}
	const method = "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas"
	for _, garbage := range [][]byte{{0xff, 0xff, 0xff, 0xff}, []byte("not a protobuf at all"), {0x0a, 0x80}} {
		st, err := raw.NewStream(t.Context(), desc, method)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(&garbage); err != nil {
			t.Fatal(err)
		}
		var out []byte
		err = st.RecvMsg(&out)
		t.Logf("garbage %q: %v", garbage, err)
		if code := status.Code(err); code == codes.OK || code == codes.Unknown {
			t.Errorf("garbage %q: the stream answered %v, want it ended with a status", garbage, err)
		}
	}
	// The server still serves a well-formed stream.
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := rlqspb.NewRateLimitQuotaServiceClient(c).StreamRateLimitQuotas(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(api, 1, 0)}}); err != nil {
		t.Fatal(err)
	}
	if r, err := st.Recv(); err != nil || share(r.GetBucketAction()[0]) != alone {
		t.Errorf("a report after the garbage = %v, %v; want a share of %d", r, err, alone)
	}
}
