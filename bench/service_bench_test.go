package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/cputime"
	"github.com/sluicehq/sluice/internal/testing/rlstest"
	"github.com/sluicehq/sluice/internal/testing/servicetest"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/envoyrls"
	"github.com/sluicehq/sluice/server/rules"
)

// serviceConfig is envoyproxy/ratelimit's README example 3: a limit per
// address, and a blocked address. 1000 a minute per address: the 10k-key
// runs stay admitted, the hot key is denied after its first 1000.
const serviceConfig = `domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
`

// newServiceAPI builds sluice serve's service for serviceConfig on its
// memory store: its engine, rules wired to their metered stores, and its
// HTTP handler.
func newServiceAPI(b *testing.B) *server.Service {
	b.Helper()
	return servicetest.New(b, serviceConfig, server.Options{})
}

// BenchmarkServiceEngine is the cost of a decision inside the service,
// without the network: matching a descriptor and deciding it on the
// memory store, for one address (keys=hot, mostly denied) or 10,000.
func BenchmarkServiceEngine(b *testing.B) {
	for _, keys := range []int{1, 10_000} {
		b.Run("keys="+keyName(keys), func(b *testing.B) {
			eng := newServiceAPI(b).Engine()
			ips := addresses(keys)
			checkParallel(b, func(i int) (bool, error) {
				res, err := eng.Check(context.Background(), rules.Request{Domain: "edge_proxy_per_ip", Descriptors: []rules.Descriptor{
					{Entries: []rules.Entry{{Key: "remote_address", Value: ips[i%len(ips)]}}},
				}})
				return res.Allowed, err
			})
		})
	}
}

// BenchmarkServiceGRPC is Envoy's ShouldRateLimit against sluice over a
// loopback gRPC connection, requests in flight on every core.
func BenchmarkServiceGRPC(b *testing.B) {
	for _, keys := range []int{1, 10_000} {
		b.Run("keys="+keyName(keys), func(b *testing.B) {
			api := newServiceAPI(b)
			svc, err := envoyrls.New(envoyrls.Config{Engine: api.Engine})
			if err != nil {
				b.Fatal(err)
			}
			client := pb.NewRateLimitServiceClient(rlstest.Serve(b, svc))
			ips := addresses(keys)
			checkParallel(b, func(i int) (bool, error) {
				resp, err := client.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{
					Domain: "edge_proxy_per_ip",
					Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{
						{Key: "remote_address", Value: ips[i%len(ips)]},
					}}},
				})
				return err == nil && resp.OverallCode == pb.RateLimitResponse_OK, err
			})
		})
	}
}

// BenchmarkServiceHTTP is POST /v1/check of a descriptor over loopback
// HTTP/1.1 keep-alive connections.
func BenchmarkServiceHTTP(b *testing.B) {
	for _, keys := range []int{1, 10_000} {
		b.Run("keys="+keyName(keys), func(b *testing.B) {
			hs := httptest.NewServer(newServiceAPI(b).Handler())
			b.Cleanup(hs.Close)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
			bodies := make([][]byte, keys)
			for i, ip := range addresses(keys) {
				bodies[i] = fmt.Appendf(nil, `{"domain":"edge_proxy_per_ip","descriptors":[{"entries":[{"key":"remote_address","value":%q}]}]}`, ip)
			}
			checkParallel(b, func(i int) (bool, error) {
				resp, err := client.Post(hs.URL+"/v1/check", "application/json", bytes.NewReader(bodies[i%len(bodies)]))
				if err != nil {
					return false, err
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return false, fmt.Errorf("check = %d %s", resp.StatusCode, body)
				}
				return bytes.HasPrefix(body, []byte(`{"allowed":true`)), nil
			})
		})
	}
}

// checkParallel times check, asked for request i = 1, 2, ... on every
// core, and reports the fraction it allowed as admitted/op and the
// process's CPU per request as cpu-ns/op (the server's and the
// client's: both run in the process); the first error fails the
// benchmark and stops its goroutine.
func checkParallel(b *testing.B, check func(i int) (allowed bool, err error)) {
	var n, allowed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Self()
	b.RunParallel(func(p *testing.PB) {
		for p.Next() {
			ok, err := check(int(n.Add(1)))
			if err != nil {
				b.Error(err)
				return
			}
			if ok {
				allowed.Add(1)
			}
		}
	})
	b.ReportMetric(float64(cputime.Self()-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(allowed.Load())/float64(n.Load()), "admitted/op")
}

// addresses returns n distinct IPv4 addresses of TEST-NET-3 and beyond.
func addresses(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255)
	}
	return out
}
