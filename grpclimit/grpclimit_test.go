package grpclimit_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/internal/testing/rlstest"
	"github.com/sluicehq/sluice/internal/testing/storefault"
	"github.com/sluicehq/sluice/store/memory"
)

// An interceptors is what serve puts in front of the health service:
// a Limiter or a Concurrency.
type interceptors interface {
	Unary() grpc.UnaryServerInterceptor
	Stream() grpc.StreamServerInterceptor
}

// serve starts a gRPC server with the health service behind l's
// interceptors on loopback, and returns a client of it.
func serve(t *testing.T, l interceptors) healthpb.HealthClient {
	t.Helper()
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(l.Unary()), grpc.ChainStreamInterceptor(l.Stream()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	return healthpb.NewHealthClient(rlstest.ServeGRPC(t, srv))
}

// limiter returns a limiter of limit on a memory store.
func limiter(t *testing.T, action string, limit sluice.Limit) *sluice.Limiter {
	t.Helper()
	st := memory.New(memory.Config{})
	t.Cleanup(func() { st.Close() })
	l, err := sluice.New(st, sluice.Config{Action: action, Limits: []sluice.Limit{limit}})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func newLimiter(t *testing.T, c grpclimit.Config) *grpclimit.Limiter {
	t.Helper()
	l, err := grpclimit.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestUnaryDenial: a peer over its limit gets RESOURCE_EXHAUSTED with a
// RetryInfo of the wait, and RateLimit fields that a structured-field
// parser reads, in the headers of every call and the trailers of a
// refused one.
func TestUnaryDenial(t *testing.T) {
	c := serve(t, newLimiter(t, grpclimit.Config{Rules: []grpclimit.Rule{{Name: "rpc", Limiter: limiter(t, "rpc", sluice.PerMinute(2))}}}))
	ctx := t.Context()
	for i := range 2 {
		var h metadata.MD
		if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&h)); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		checkFields(t, h, false)
	}
	var h, tr metadata.MD
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&h), grpc.Trailer(&tr))
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("third call: %v, want ResourceExhausted", err)
	}
	var wait time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			wait = ri.GetRetryDelay().AsDuration()
		}
	}
	if wait < 20*time.Second || wait > 30*time.Second { // 2 a minute: one every 30 s
		t.Errorf("RetryInfo delay %v, want about 30 s", wait)
	}
	checkFields(t, metadata.Join(h, tr), true)
}

// checkFields checks the RateLimit fields of md, and Retry-After when
// denied.
func checkFields(t *testing.T, md metadata.MD, denied bool) {
	t.Helper()
	for _, f := range []string{"ratelimit-policy", "ratelimit"} {
		if l, err := httpsfv.UnmarshalList(md.Get(f)); err != nil || len(l) == 0 {
			t.Errorf("%s %q is not a structured-field list: %v", f, md.Get(f), err)
		}
	}
	if ra := md.Get("retry-after"); (len(ra) > 0) != denied {
		t.Errorf("retry-after %q, want one: %v", ra, denied)
	}
}

// TestStreamDenial: a stream counts once, when it opens, and a refused
// one ends with RESOURCE_EXHAUSTED.
func TestStreamDenial(t *testing.T) {
	c := serve(t, newLimiter(t, grpclimit.Config{Rules: []grpclimit.Rule{{Limiter: limiter(t, "watch", sluice.PerMinute(1))}}}))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	first, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Recv(); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	second, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("second stream: %v, want ResourceExhausted", err)
	}
}

// TestKeysAndMatch: a metadata key gives each API key its own allowance,
// a call without one shares UnknownKey's, and a rule counts only the
// methods it matches.
func TestKeysAndMatch(t *testing.T) {
	c := serve(t, newLimiter(t, grpclimit.Config{Rules: []grpclimit.Rule{{
		Limiter: limiter(t, "key", sluice.PerMinute(1)),
		Key:     grpclimit.Metadata("X-Api-Key"),
		Match:   func(m string) bool { return m == "/grpc.health.v1.Health/Check" },
	}}}))
	call := func(key string) codes.Code {
		ctx := t.Context()
		if key != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", key)
		}
		_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
		return status.Code(err)
	}
	got := []codes.Code{call("a"), call("a"), call("b"), call(""), call("")}
	want := []codes.Code{codes.OK, codes.ResourceExhausted, codes.OK, codes.OK, codes.ResourceExhausted}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("calls a, a, b, none, none: %v, want %v", got, want)
			break
		}
	}
	if _, err := c.List(t.Context(), &healthpb.HealthListRequest{}); status.Code(err) == codes.ResourceExhausted {
		t.Errorf("List, which the rule does not match, was limited: %v", err)
	}
}

// TestStoreFailure: with the store down, calls go through, or, failing
// closed, are refused with UNAVAILABLE.
func TestStoreFailure(t *testing.T) {
	down := storefault.New(t)
	down.SetFail(true)
	lim, err := sluice.New(down, sluice.Config{Action: "x", Limits: []sluice.Limit{sluice.PerMinute(1)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		policy sluice.FailurePolicy
		want   codes.Code
	}{{sluice.FailOpen, codes.OK}, {sluice.FailClosed, codes.Unavailable}} {
		c := serve(t, newLimiter(t, grpclimit.Config{Rules: []grpclimit.Rule{{Limiter: lim}}, Failure: tt.policy}))
		if _, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{}); status.Code(err) != tt.want {
			t.Errorf("store down, policy %v: %v, want %v", tt.policy, err, tt.want)
		}
	}
	for _, p := range []sluice.FailurePolicy{sluice.FailLocal, 9} {
		if _, err := grpclimit.New(grpclimit.Config{Rules: []grpclimit.Rule{{Limiter: lim}}, Failure: p}); !errors.Is(err, sluice.ErrInvalidRequest) {
			t.Errorf("New with policy %v: %v, want ErrInvalidRequest", p, err)
		}
		if _, err := grpclimit.NewConcurrency(grpclimit.ConcurrencyConfig{Limiter: newConcurrency(t, 1), Failure: p}); !errors.Is(err, sluice.ErrInvalidRequest) {
			t.Errorf("NewConcurrency with policy %v: %v, want ErrInvalidRequest", p, err)
		}
	}
}

// TestPeerAddr keys IPv4 peers by address and IPv6 peers by their /64.
func TestPeerAddr(t *testing.T) {
	for _, tt := range []struct{ addr, want string }{
		{"127.0.0.1:5000", "127.0.0.1"},
		{"[2001:db8:1:2::7]:5000", "2001:db8:1:2::/64"},
		{"[::ffff:192.0.2.1]:5000", "192.0.2.1"},
	} {
		ap, err := net.ResolveTCPAddr("tcp", tt.addr)
		if err != nil {
			t.Fatal(err)
		}
		ctx := peerContext(ap)
		if got, ok := grpclimit.PeerAddr(0)(ctx, "/m"); !ok || got != tt.want {
			t.Errorf("PeerAddr(%s) = %q, %v; want %q", tt.addr, got, ok, tt.want)
		}
	}
	if _, ok := grpclimit.PeerAddr(0)(context.Background(), "/m"); ok {
		t.Error("PeerAddr without a peer: a key")
	}
}
func peerContext(a net.Addr) context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{Addr: a})
}

// noLimits is a Decider without limits, which New refuses.
type noLimits struct{}

func (noLimits) Allow(context.Context, string) (sluice.Decision, error) {
	return sluice.Decision{}, nil
}
func (noLimits) Reset(context.Context, string) error { return nil }
func (noLimits) Limits() []sluice.Limit              { return nil }

// TestNewRefuses checks what New refuses: no rules, a rule without a
// Limiter, a Limiter without limits.
func TestNewRefuses(t *testing.T) {
	for _, c := range []grpclimit.Config{
		{},
		{Rules: []grpclimit.Rule{{Name: "x"}}},
		{Rules: []grpclimit.Rule{{Name: "x", Limiter: noLimits{}}}},
	} {
		if _, err := grpclimit.New(c); !errors.Is(err, sluice.ErrInvalidRequest) {
			t.Errorf("New(%+v) = %v, want ErrInvalidRequest", c, err)
		}
	}
}
