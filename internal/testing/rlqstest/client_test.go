package rlqstest_test

import (
	"net"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/internal/testing/rlqstest"
	"github.com/sluicehq/sluice/internal/testing/testclock"
)

// The tests run a Client against a scripted RLQS server on loopback:
// the server hands each stream to the test, which reads its reports and
// sends the actions it chooses. Decisions are made at the times of a
// fake clock; the tests wait for events (a stream, a report, an action
// applied), never for time.

// waitFor bounds every wait for an event of the test.
const waitFor = 10 * time.Second

// A server is a scripted RLQS server.
type server struct {
	rlqspb.UnimplementedRateLimitQuotaServiceServer
	addr    string
	streams chan *serverStream
}

// A serverStream is one stream the server was opened: its metadata, its
// reports, and end, which ends it with the error sent.
type serverStream struct {
	md      metadata.MD
	srv     rlqspb.RateLimitQuotaService_StreamRateLimitQuotasServer
	reports chan *rlqspb.RateLimitQuotaUsageReports
	end     chan error
}

func startServer(t *testing.T) *server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{addr: lis.Addr().String(), streams: make(chan *serverStream, 8)}
	g := grpc.NewServer()
	rlqspb.RegisterRateLimitQuotaServiceServer(g, s)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return s
}

func (s *server) StreamRateLimitQuotas(srv rlqspb.RateLimitQuotaService_StreamRateLimitQuotasServer) error {
	md, _ := metadata.FromIncomingContext(srv.Context())
	st := &serverStream{md: md, srv: srv, reports: make(chan *rlqspb.RateLimitQuotaUsageReports, 1024), end: make(chan error, 1)}
	s.streams <- st
	go func() {
		for {
			m, err := srv.Recv()
			if err != nil {
				return
			}
			select {
			case st.reports <- m:
			case <-srv.Context().Done():
				return
			}
		}
	}()
	select {
	case err := <-st.end:
		return err
	case <-srv.Context().Done():
		return nil
	}
}

// stream returns the next stream opened to s.
func (s *server) stream(t *testing.T) *serverStream {
	t.Helper()
	select {
	case st := <-s.streams:
		return st
	case <-time.After(waitFor):
		t.Fatalf("no stream opened to %s within %v", s.addr, waitFor)
		return nil
	}
}

// report returns the next report of the stream.
func (st *serverStream) report(t *testing.T) *rlqspb.RateLimitQuotaUsageReports {
	t.Helper()
	select {
	case r := <-st.reports:
		return r
	case <-time.After(waitFor):
		t.Fatalf("no report within %v", waitFor)
		return nil
	}
}

var t0 = testclock.T0

// A tested client is a Client on a fake clock, whose applied actions the
// test can wait for.
type tested struct {
	*rlqstest.Client
	clock   *testclock.Clock
	applied chan rlqstest.Received
}

// newClient returns a Client of c reporting to targets, on a fake clock
// at t0; it reports only its subscriptions unless c.Interval is set.
func newClient(t *testing.T, c rlqstest.Config, targets ...string) *tested {
	t.Helper()
	tc := &tested{clock: testclock.New(t0), applied: make(chan rlqstest.Received, 64)}
	c.Targets, c.Domain, c.Clock = targets, "edge", tc.clock.Now
	c.OnAction = func(r rlqstest.Received) { tc.applied <- r }
	if c.Interval == 0 {
		c.Interval = time.Hour
	}
	cl, err := rlqstest.New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	tc.Client = cl
	return tc
}

// send sends acts on the stream, and waits until the client applied them.
func (tc *tested) send(t *testing.T, st *serverStream, acts ...*rlqspb.RateLimitQuotaResponse_BucketAction) {
	t.Helper()
	if err := st.srv.Send(&rlqspb.RateLimitQuotaResponse{BucketAction: acts}); err != nil {
		t.Fatal(err)
	}
	for range acts {
		select {
		case <-tc.applied:
		case <-time.After(waitFor):
			t.Fatalf("the client applied no action within %v", waitFor)
		}
	}
}

// allows decides n requests of id at the time d after t0, and returns
// how many it allowed.
func (tc *tested) allows(id map[string]string, d time.Duration, n int) int {
	tc.clock.Set(t0.Add(d))
	got := 0
	for range n {
		if tc.Allow(id) {
			got++
		}
	}
	return got
}

var id = map[string]string{"name": "api"}

// subscribed returns a client of cfg whose first request, for bucket id,
// subscribed to a server of its own, and the stream its subscription
// report came on.
func subscribed(t *testing.T, cfg rlqstest.Config) (*tested, *serverStream) {
	s := startServer(t)
	c := newClient(t, cfg, s.addr)
	c.Allow(id)
	st := s.stream(t)
	st.report(t)
	return c, st
}

func blanket(rule typev3.RateLimitStrategy_BlanketRule) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: rule}}
}

var (
	allowAll = blanket(typev3.RateLimitStrategy_ALLOW_ALL)
	denyAll  = blanket(typev3.RateLimitStrategy_DENY_ALL)
)

// tokens is a token bucket strategy of max tokens, perSecond added a
// second.
func tokens(max, perSecond uint32) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens: max, TokensPerFill: wrapperspb.UInt32(perSecond), FillInterval: durationpb.New(time.Second)}}}
}

// assign is the assignment of st to id for ttl.
func assign(st *typev3.RateLimitStrategy, ttl time.Duration) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return &rlqspb.RateLimitQuotaResponse_BucketAction{
		BucketId: &rlqspb.BucketId{Bucket: id},
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: durationpb.New(ttl), RateLimitStrategy: st}}}
}

// TestNoAssignment: until a bucket's first assignment, the client
// applies the no-assignment behaviour (no fallback: allow all), and its
// first request sends the subscription at once: the domain and the
// bucket, that request counted.
func TestNoAssignment(t *testing.T) {
	tests := []struct {
		name     string
		fallback *typev3.RateLimitStrategy
		want     int // of 5 requests at one instant
	}{
		{"none: allow all", nil, 5},
		{"allow all", allowAll, 5},
		{"deny all", denyAll, 0},
		{"a token bucket of 2", tokens(2, 1), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startServer(t)
			c := newClient(t, rlqstest.Config{NoAssignment: tt.fallback}, s.addr)
			first := c.Allow(id)
			r := s.stream(t).report(t)
			us := r.GetBucketQuotaUsages()
			if r.GetDomain() != "edge" || len(us) != 1 || rlqstest.Key(us[0].GetBucketId().GetBucket()) != "name=api" ||
				us[0].GetNumRequestsAllowed()+us[0].GetNumRequestsDenied() != 1 || (us[0].GetNumRequestsAllowed() == 1) != first {
				t.Errorf("the subscription = %v; want domain edge, bucket name=api, its first request (allowed %v)", r, first)
			}
			if got := boolInt(first) + c.allows(id, 0, 4); got != tt.want {
				t.Errorf("allowed %d of 5 requests without an assignment, want %d", got, tt.want)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestAssignment: an assignment applies until its TTL; a token bucket
// starts full and fills at its rate; the same token bucket assigned
// again extends the assignment and keeps its tokens, another one
// replaces it with a new, full bucket; blanket rules apply as such.
func TestAssignment(t *testing.T) {
	c, st := subscribed(t, rlqstest.Config{NoAssignment: denyAll})
	steps := []struct {
		name   string
		send   *rlqspb.RateLimitQuotaResponse_BucketAction // nil: none
		at     time.Duration
		n      int
		wanted int
	}{
		{"a new token bucket of 3 is full", assign(tokens(3, 1), 10*time.Second), 0, 5, 3},
		{"it fills at 1/s", nil, time.Second, 5, 1},
		{"the same bucket again keeps its tokens", assign(tokens(3, 1), 10*time.Second), time.Second, 5, 0},
		{"and extends the assignment past its first TTL", nil, 10500 * time.Millisecond, 5, 3},
		{"another bucket replaces it, full", assign(tokens(5, 1), 10*time.Second), 10500 * time.Millisecond, 9, 5},
		{"DENY_ALL", assign(denyAll, 10*time.Second), 11 * time.Second, 3, 0},
		{"ALLOW_ALL", assign(allowAll, 10*time.Second), 11 * time.Second, 3, 3},
		{"past its TTL: the no-assignment behaviour", nil, 21 * time.Second, 3, 0},
	}
	for _, step := range steps {
		c.clock.Set(t0.Add(step.at))
		if step.send != nil {
			c.send(t, st, step.send)
		}
		if got := c.allows(id, step.at, step.n); got != step.wanted {
			t.Errorf("%s: allowed %d of %d at %v, want %d", step.name, got, step.n, step.at, step.wanted)
		}
	}
}

// TestExpired: past an assignment's TTL, the expired-assignment
// behaviour applies for its timeout (a fallback strategy, or the last
// assignment again), then the no-assignment behaviour.
func TestExpired(t *testing.T) {
	tests := []struct {
		name               string
		expired            *rlqstest.Expired
		assigned, fallback *typev3.RateLimitStrategy
		want               map[time.Duration]bool // at, allowed
	}{
		{"no expired behaviour", nil, allowAll, denyAll,
			map[time.Duration]bool{time.Second: true, 2 * time.Second: false}},
		{"a fallback for 3s", &rlqstest.Expired{Timeout: 3 * time.Second, Fallback: allowAll}, denyAll, denyAll,
			map[time.Duration]bool{time.Second: false, 2 * time.Second: true, 4900 * time.Millisecond: true, 5 * time.Second: false}},
		// Its Fallback, nil, would allow all: the denials at 3s are the
		// last assignment's.
		{"the last assignment for 3s", &rlqstest.Expired{Timeout: 3 * time.Second, ReuseLast: true}, denyAll, allowAll,
			map[time.Duration]bool{time.Second: false, 3 * time.Second: false, 5 * time.Second: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, st := subscribed(t, rlqstest.Config{NoAssignment: tt.fallback, Expired: tt.expired})
			c.send(t, st, assign(tt.assigned, 2*time.Second))
			for at, want := range tt.want {
				if got := c.allows(id, at, 1) == 1; got != want {
					t.Errorf("at %v after an assignment of 2s: allowed %v, want %v", at, got, want)
				}
			}
		})
	}
}

// TestAbandon: an abandon action erases the bucket: the client holds it
// no longer, and its next request subscribes again, under the
// no-assignment behaviour.
func TestAbandon(t *testing.T) {
	c, st := subscribed(t, rlqstest.Config{NoAssignment: denyAll})
	c.send(t, st, assign(allowAll, time.Minute))
	if c.allows(id, 0, 1) != 1 {
		t.Fatalf("ALLOW_ALL assigned: a request was denied")
	}
	c.send(t, st, &rlqspb.RateLimitQuotaResponse_BucketAction{BucketId: &rlqspb.BucketId{Bucket: id},
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction_{AbandonAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction{}}})
	if _, held := c.Assignment(id); held {
		t.Errorf("after an abandon the client still holds the bucket")
	}
	if c.allows(id, 0, 1) != 0 {
		t.Errorf("after an abandon, a request was allowed: want the no-assignment behaviour (DENY_ALL)")
	}
	r := st.report(t)
	if us := r.GetBucketQuotaUsages(); len(us) != 1 || us[0].GetNumRequestsDenied() != 1 {
		t.Errorf("the request after the abandon sent %v, want a new subscription of the bucket, its request denied", r)
	}
}

// TestReconnect: a stream that ends with an error is opened again at the
// next report, on the next target, with the same metadata; the buckets
// keep their assignments across it and are reported on the new stream.
func TestReconnect(t *testing.T) {
	a, b := startServer(t), startServer(t)
	c := newClient(t, rlqstest.Config{NoAssignment: denyAll, Interval: 20 * time.Millisecond,
		Metadata: map[string]string{"x-sluice-client": "edge-1"}}, a.addr, b.addr)
	c.Allow(id)
	st := a.stream(t)
	st.report(t)
	c.send(t, st, assign(allowAll, time.Minute))
	st.end <- status.Error(codes.Unavailable, "replica going away")

	st2 := b.stream(t)
	if got := st2.md.Get("x-sluice-client"); len(got) != 1 || got[0] != "edge-1" {
		t.Errorf("the new stream's metadata x-sluice-client = %q, want edge-1", got)
	}
	if r := st2.report(t); r.GetDomain() != "edge" || len(r.GetBucketQuotaUsages()) != 1 {
		t.Errorf("the first report on the new stream = %v, want domain edge and the bucket", r)
	}
	if c.allows(id, time.Second, 1) != 1 {
		t.Errorf("after the reconnection, the bucket's ALLOW_ALL no longer applies")
	}
	if l := c.Log(); l.Streams != 2 || l.StreamErrors != 1 {
		t.Errorf("log: %d streams, %d ended by an error; want 2 and 1", l.Streams, l.StreamErrors)
	}
}
