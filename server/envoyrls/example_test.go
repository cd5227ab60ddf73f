package envoyrls_test

import (
	"context"
	"fmt"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/server/envoyrls"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/store/memory"
)

// An envoyproxy/ratelimit configuration, served to Envoy. The service is
// called directly here; NewServer registers it on a gRPC server.
func Example() {
	c, err := config.Parse("ratelimit.yaml", []byte(`
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 2}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	st := memory.New(memory.Config{})
	defer st.Close()
	now := func() time.Time { return time.Date(2026, 1, 1, 12, 0, 30, 0, time.UTC) }
	eng, err := rules.New(rules.Config{Store: st, Domains: c.Domains, Clock: now})
	if err != nil {
		fmt.Println(err)
		return
	}
	svc, _ := envoyrls.New(envoyrls.Config{Engine: func() *rules.Engine { return eng }})

	req := &pb.RateLimitRequest{
		Domain: "edge_proxy_per_ip",
		Descriptors: []*rlv3.RateLimitDescriptor{{
			Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "203.0.113.7"}},
		}},
	}
	for range 3 {
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			fmt.Println(err)
			return
		}
		st := resp.Statuses[0]
		fmt.Println(resp.OverallCode, st.LimitRemaining, st.DurationUntilReset.AsDuration())
	}
	// Output:
	// OK 1 30s
	// OK 0 30s
	// OVER_LIMIT 0 30s
}
