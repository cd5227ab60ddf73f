package envoyrls_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testing/rlstest"
	"github.com/sluicehq/sluice/server/envoyrls"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/wire"
)

// start is a minute boundary: fixed windows of any unit begin there.
var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const testConfig = `rules:
  - domain: edge
    descriptors:
      - key: remote_address
        rate_limit: {unit: second, requests_per_unit: 10}
      - key: remote_address
        value: 50.0.0.5
        rate_limit: {unit: second, requests_per_unit: 0}
      - key: path
        value: /login
        descriptors:
          - key: remote_address
            limits: ["30/5m sliding"]
      - key: user
        shadow_mode: true
        rate_limit: {unit: minute, requests_per_unit: 1}
      - key: health
        rate_limit: {unlimited: true}
      - key: odd
        limits: ["3/1500ms"]
`

// serve starts the service for testConfig on a loopback listener and
// returns a client of it. A memory store keeps the state.
func serve(t *testing.T, headers bool) pb.RateLimitServiceClient {
	t.Helper()
	return pb.NewRateLimitServiceClient(dial(t, headers))
}

// dial starts the service as serve does and returns a connection to it.
func dial(t *testing.T, headers bool) *grpc.ClientConn {
	t.Helper()
	return rlstest.Serve(t, newService(t, headers))
}

// newService returns the service for testConfig, over a memory store.
func newService(t testing.TB, headers bool) *envoyrls.Service {
	t.Helper()
	st := memory.New(memory.Config{SweepInterval: -1})
	t.Cleanup(func() { st.Close() })
	return newServiceOn(t, headers, st)
}

// newServiceOn returns the service for testConfig, over st.
func newServiceOn(t testing.TB, headers bool, st sluice.Store) *envoyrls.Service {
	t.Helper()
	c, err := config.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := rules.New(rules.Config{Store: st, Domains: c.Domains, Clock: func() time.Time { return start }})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := envoyrls.New(envoyrls.Config{
		Engine:          func() *rules.Engine { return eng },
		ResponseHeaders: headers,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func TestShouldRateLimit(t *testing.T) {
	c := serve(t, false)
	ip := rlstest.Descriptor("remote_address=203.0.113.7")
	for i := range 10 {
		resp := rlstest.ShouldRateLimit(t, c, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{ip}})
		st := resp.Statuses[0]
		if resp.OverallCode != pb.RateLimitResponse_OK || st.Code != pb.RateLimitResponse_OK || st.LimitRemaining != uint32(9-i) {
			t.Fatalf("request %d: %v, want OK with %d remaining", i, resp, 9-i)
		}
		if l := st.CurrentLimit; l.RequestsPerUnit != 10 || l.Unit != pb.RateLimitResponse_RateLimit_SECOND || l.UnitMultiplier != nil {
			t.Errorf("current_limit = %v, want 10 per second", l)
		}
		if got := st.DurationUntilReset.AsDuration(); got != time.Second {
			t.Errorf("duration_until_reset = %v, want 1s", got)
		}
	}
	resp := rlstest.ShouldRateLimit(t, c, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{ip, rlstest.Descriptor("health=x")}})
	if resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT || resp.Statuses[0].Code != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("11th request: %v, want OVER_LIMIT", resp)
	}
	if st := resp.Statuses[1]; st.Code != pb.RateLimitResponse_OK || st.LimitRemaining != math.MaxUint32 || st.CurrentLimit != nil {
		t.Errorf("unlimited status = %v, want OK, remaining MaxUint32, no limit", st)
	}
	if len(resp.ResponseHeadersToAdd) != 0 {
		t.Errorf("headers %v without ResponseHeaders, want none", resp.ResponseHeadersToAdd)
	}

	blocked := rlstest.ShouldRateLimit(t, c, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{rlstest.Descriptor("remote_address=50.0.0.5")}})
	if st := blocked.Statuses[0]; blocked.OverallCode != pb.RateLimitResponse_OVER_LIMIT || st.CurrentLimit.RequestsPerUnit != 0 {
		t.Errorf("blocked address: %v, want OVER_LIMIT with a limit of 0", blocked)
	}

	login := rlstest.ShouldRateLimit(t, c, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{rlstest.Descriptor("path=/login", "remote_address=203.0.113.7")}})
	if l := login.Statuses[0].CurrentLimit; l.RequestsPerUnit != 30 || l.Unit != pb.RateLimitResponse_RateLimit_MINUTE || l.UnitMultiplier.GetValue() != 5 {
		t.Errorf("30/5m current_limit = %v, want 30 per 5 minutes", l)
	}
	odd := rlstest.ShouldRateLimit(t, c, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{rlstest.Descriptor("odd=1")}})
	if l := odd.Statuses[0].CurrentLimit; l.Name != "3/1500ms" || l.Unit != pb.RateLimitResponse_RateLimit_UNKNOWN {
		t.Errorf("3/1500ms current_limit = %v, want it named by its policy", l)
	}

	for i := range 3 {
		resp := rlstest.ShouldRateLimit(t, c, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{rlstest.Descriptor("user=bob")}})
		if resp.OverallCode != pb.RateLimitResponse_OK || resp.Statuses[0].Code != pb.RateLimitResponse_OK {
			t.Errorf("shadow request %d: %v, want OK", i, resp)
		}
	}

	nomatch := rlstest.ShouldRateLimit(t, c, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{rlstest.Descriptor("nothing=here")}})
	if st := nomatch.Statuses[0]; nomatch.OverallCode != pb.RateLimitResponse_OK || st.CurrentLimit != nil {
		t.Errorf("descriptor without a rule: %v, want OK without a limit", nomatch)
	}
	unknown := rlstest.ShouldRateLimit(t, c, &pb.RateLimitRequest{Domain: "nope", Descriptors: []*rlv3.RateLimitDescriptor{ip, ip}})
	if unknown.OverallCode != pb.RateLimitResponse_OK || len(unknown.Statuses) != 2 || unknown.Statuses[1].Code != pb.RateLimitResponse_OK {
		t.Errorf("unknown domain: %v, want OK with 2 OK statuses (as Envoy's service)", unknown)
	}
}

// TestHitsAddend checks the request's hits_addend, a descriptor's own
// (0 asks without taking), and a limit override.
func TestHitsAddend(t *testing.T) {
	c := serve(t, false)
	ip := rlstest.Descriptor("remote_address=198.51.100.1")
	resp := rlstest.ShouldRateLimit(t, c, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{ip}, HitsAddend: 4})
	if got := resp.Statuses[0].LimitRemaining; got != 6 {
		t.Errorf("hits_addend 4: remaining %d, want 6", got)
	}
	peek := rlstest.Descriptor("remote_address=198.51.100.1")
	peek.HitsAddend = wrapperspb.UInt64(0)
	resp = rlstest.ShouldRateLimit(t, c, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{peek}, HitsAddend: 4})
	if got := resp.Statuses[0].LimitRemaining; got != 6 || resp.OverallCode != pb.RateLimitResponse_OK {
		t.Errorf("descriptor hits_addend 0: %v, want OK with remaining 6 (nothing taken)", resp)
	}
	two := rlstest.Descriptor("remote_address=198.51.100.1")
	two.HitsAddend = wrapperspb.UInt64(2)
	resp = rlstest.ShouldRateLimit(t, c, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{two}, HitsAddend: 4})
	if got := resp.Statuses[0].LimitRemaining; got != 4 {
		t.Errorf("descriptor hits_addend 2: remaining %d, want 4", got)
	}
	big := rlstest.ShouldRateLimit(t, c, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{rlstest.Descriptor("remote_address=198.51.100.2")}, HitsAddend: 11})
	if big.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("hits_addend 11 of 10: %v, want OVER_LIMIT", big)
	}

	over := rlstest.Descriptor("anything=x")
	over.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_HOUR}
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		resp := rlstest.ShouldRateLimit(t, c, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{over}})
		if resp.OverallCode != want || resp.Statuses[0].CurrentLimit.GetUnit() != pb.RateLimitResponse_RateLimit_HOUR {
			t.Errorf("override request %d: %v, want %v under 2 per hour", i, resp, want)
		}
	}
}

// TestResponseHeaders checks the IETF fields asked of Envoy.
func TestResponseHeaders(t *testing.T) {
	c := serve(t, true)
	ip := rlstest.Descriptor("remote_address=192.0.2.1")
	headers := func(resp *pb.RateLimitResponse) map[string]string {
		m := map[string]string{}
		for _, h := range resp.ResponseHeadersToAdd {
			m[h.Key] = h.Value
		}
		return m
	}
	h := headers(rlstest.ShouldRateLimit(t, c, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{ip, rlstest.Descriptor("health=1")}, HitsAddend: 10}))
	want := map[string]string{"RateLimit-Policy": `"edge.remote_address";q=10;w=1`, "RateLimit": `"edge.remote_address";r=0;t=1`}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("allowed: header %s = %q, want %q (all: %v)", k, h[k], v, h)
		}
	}
	if _, ok := h["Retry-After"]; ok {
		t.Errorf("allowed: Retry-After set: %v", h)
	}
	h = headers(rlstest.ShouldRateLimit(t, c, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{ip}}))
	if h["Retry-After"] != "1" || h["RateLimit"] != `"edge.remote_address";r=0;t=1` {
		t.Errorf("denied: headers %v, want Retry-After 1", h)
	}
	h = headers(rlstest.ShouldRateLimit(t, c, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{rlstest.Descriptor("nothing=here")}}))
	if len(h) != 0 {
		t.Errorf("no rule: headers %v, want none", h)
	}
}

// TestRetryAfterMetadata checks that every denial carries its wait in
// the response metadata, by default (without ResponseHeaders), to the
// millisecond (a block entry, requests_per_unit: 0, until its unit
// ends); an admission carries none.
func TestRetryAfterMetadata(t *testing.T) {
	c := serve(t, false)
	call := func(d *rlv3.RateLimitDescriptor, hits uint32) (*pb.RateLimitResponse, []string) {
		t.Helper()
		var md metadata.MD
		resp, err := c.ShouldRateLimit(t.Context(), &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{d}, HitsAddend: hits}, grpc.Header(&md))
		if err != nil {
			t.Fatal(err)
		}
		return resp, md.Get(wire.RetryAfterKey)
	}
	odd := rlstest.Descriptor("odd=1") // 3/1500ms: a denial waits 500ms
	if resp, got := call(odd, 3); resp.OverallCode != pb.RateLimitResponse_OK || got != nil {
		t.Errorf("allowed: %v, metadata %q; want OK, none", resp.OverallCode, got)
	}
	if resp, got := call(odd, 1); resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT || len(got) != 1 || got[0] != "0.5" {
		t.Errorf("denied: %v, metadata %q; want OVER_LIMIT, 0.5", resp.OverallCode, got)
	}
	if resp, got := call(rlstest.Descriptor("remote_address=50.0.0.5"), 1); resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT || len(got) != 1 || got[0] != "1" {
		t.Errorf("blocked by requests_per_unit 0: %v, metadata %q; want OVER_LIMIT, until the unit ends, 1", resp.OverallCode, got)
	}
	if resp, got := call(rlstest.Descriptor("health=1"), 1); resp.OverallCode != pb.RateLimitResponse_OK || got != nil || len(resp.ResponseHeadersToAdd) != 0 {
		t.Errorf("unlimited: %v, metadata %q, headers %v; want OK, nothing", resp.OverallCode, got, resp.ResponseHeadersToAdd)
	}
}

// TestBadRequests checks that malformed requests fail at once with
// InvalidArgument (or ResourceExhausted for an oversized message),
// whatever their size.
func TestBadRequests(t *testing.T) {
	c := serve(t, false)
	many := make([]*rlv3.RateLimitDescriptor, 5000)
	for i := range many {
		many[i] = rlstest.Descriptor("remote_address=203.0.113.7")
	}
	huge := make([]*rlv3.RateLimitDescriptor, 100)
	for i := range huge {
		huge[i] = rlstest.Descriptor("remote_address=" + strings.Repeat("x", 20000))
	}
	neg := rlstest.Descriptor("remote_address=1")
	neg.IsNegativeHits = true
	tests := []struct {
		name string
		req  *pb.RateLimitRequest
		want codes.Code
		msg  string
	}{
		{"no domain", &pb.RateLimitRequest{Descriptors: []*rlv3.RateLimitDescriptor{rlstest.Descriptor("a=b")}}, codes.InvalidArgument, "domain is required"},
		{"no descriptors", &pb.RateLimitRequest{Domain: "edge"}, codes.InvalidArgument, "no descriptors"},
		{"empty descriptor", &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{{}}}, codes.InvalidArgument, "no entries"},
		{"5000 descriptors", &pb.RateLimitRequest{Domain: "edge", Descriptors: many}, codes.InvalidArgument, "too many descriptors: 5000, at most 256"},
		{"2 MB message", &pb.RateLimitRequest{Domain: "edge", Descriptors: huge}, codes.ResourceExhausted, ""},
		{"negative hits", &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{neg}}, codes.InvalidArgument, "negative hits"},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := c.ShouldRateLimit(ctx, tt.req)
		cancel()
		if s := status.Convert(err); s.Code() != tt.want || !strings.Contains(s.Message(), tt.msg) {
			t.Errorf("%s: ShouldRateLimit = %v, %v; want %v containing %q", tt.name, resp, err, tt.want, tt.msg)
		}
	}
}

// failingStore fails every decision, as a store that cannot decide does
// (Redis down, a timeout).
type failingStore struct{}

func (failingStore) Decide(context.Context, sluice.Request) (sluice.Decision, error) {
	return sluice.Decision{}, fmt.Errorf("%w: the test's store is down", sluice.ErrStore)
}

// TestStoreFailure checks that a store that cannot decide is Unavailable.
func TestStoreFailure(t *testing.T) {
	c := pb.NewRateLimitServiceClient(rlstest.Serve(t, newServiceOn(t, false, failingStore{})))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.ShouldRateLimit(ctx, &pb.RateLimitRequest{
		Domain:      "edge",
		Descriptors: []*rlv3.RateLimitDescriptor{rlstest.Descriptor("remote_address=203.0.113.7")},
	})
	if s := status.Convert(err); s.Code() != codes.Unavailable {
		t.Errorf("failing store: error %v, want Unavailable", err)
	}
}

// TestHealth checks the standard gRPC health service beside the API.
func TestHealth(t *testing.T) {
	h := healthpb.NewHealthClient(dial(t, false))
	for _, svc := range []string{"", "envoy.service.ratelimit.v3.RateLimitService"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		cancel()
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Health.Check(%q) = %v, %v; want SERVING", svc, resp, err)
		}
	}
}

func TestNewNeedsEngine(t *testing.T) {
	if s, err := envoyrls.New(envoyrls.Config{}); err == nil {
		t.Errorf("New without an engine = %v, want an error", s)
	}
}
