package rlqs_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/testing/servicetest"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/rlqs"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/store/memory"
)

// protocolConfig divides 100/s among the edges of domain "edge" whose
// ids name "api"; the tenant entry names the actor, and tenant "evil"
// is deny-listed.
const protocolConfig = `rules:
  - name: api
    limits: ["100/s"]
guard:
  deny: ["key:evil"]
quota:
  report_interval: 1s
  ttl: 2s
  idle: 5s
  max_buckets: 3
  buckets:
    - {domain: edge, match: {name: api}, rule: api, actor: tenant}
`

// A fakeStream is the server side of one RLQS stream, in memory, so that
// the stream's timers run on synctest's clock.
type fakeStream struct {
	grpc.ServerStream
	ctx  context.Context
	in   chan *rlqspb.RateLimitQuotaUsageReports
	out  chan *rlqspb.RateLimitQuotaResponse
	done chan error
}

func (f *fakeStream) Context() context.Context { return f.ctx }

func (f *fakeStream) Recv() (*rlqspb.RateLimitQuotaUsageReports, error) {
	select {
	case m, ok := <-f.in:
		if !ok {
			return nil, io.EOF
		}
		return m, nil
	case <-f.ctx.Done():
		return nil, f.ctx.Err()
	}
}

func (f *fakeStream) Send(m *rlqspb.RateLimitQuotaResponse) error {
	f.out <- m
	return nil
}

// open starts a stream of q, named name by rlqs.ClientHeader when name
// is not empty; it ends with the test.
func open(t testing.TB, q *rlqs.Service, name string) *fakeStream {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	if name != "" {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(rlqs.ClientHeader, name))
	}
	f := &fakeStream{ctx: ctx, in: make(chan *rlqspb.RateLimitQuotaUsageReports),
		out: make(chan *rlqspb.RateLimitQuotaResponse, 16), done: make(chan error, 1)}
	go func() { f.done <- q.StreamRateLimitQuotas(f) }()
	return f
}

// report sends one report of domain with usages and returns the response.
func (f *fakeStream) report(t testing.TB, domain string, us ...*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage) *rlqspb.RateLimitQuotaResponse {
	t.Helper()
	f.in <- &rlqspb.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: us}
	select {
	case r := <-f.out:
		return r
	case err := <-f.done:
		t.Fatalf("the stream ended instead of answering: %v", err)
		return nil
	}
}

// ended sends a report and returns the status the stream ended with.
func (f *fakeStream) ended(t *testing.T, domain string, us ...*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage) codes.Code {
	t.Helper()
	f.in <- &rlqspb.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: us}
	select {
	case r := <-f.out:
		t.Fatalf("the stream answered %v, want it ended", r)
	case err := <-f.done:
		return status.Code(err)
	}
	return codes.OK
}

func usage(id map[string]string, allowed, denied uint64) *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage {
	return &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqspb.BucketId{Bucket: id},
		TimeElapsed: durationpb.New(0), NumRequestsAllowed: allowed, NumRequestsDenied: denied}
}

// share returns the tokens per fill of an action's token bucket, -1 for
// ALLOW_ALL, -2 for DENY_ALL, -3 for an abandon.
func share(a *rlqspb.RateLimitQuotaResponse_BucketAction) int {
	if a.GetAbandonAction() != nil {
		return -3
	}
	st := a.GetQuotaAssignmentAction().GetRateLimitStrategy()
	switch {
	case st.GetTokenBucket() != nil:
		return int(st.GetTokenBucket().GetTokensPerFill().GetValue())
	case st.GetBlanketRule() == typev3.RateLimitStrategy_ALLOW_ALL:
		return -1
	}
	return -2
}

func newService(t *testing.T) (*server.Service, *rlqs.Service) {
	t.Helper()
	svc := servicetest.New(t, protocolConfig, server.Options{})
	return svc, svc.QuotaService()
}

var api = map[string]string{"name": "api", "tenant": "a"}

// alone is the share of an edge alone on a bucket of 100/s: the limit
// less its reserve for newcomers (config.DefaultQuotaReserve, 5%).
const alone = 100 - 5

// TestProtocolSubscribe: the first report of a bucket subscribes, and
// is answered by a QuotaAssignmentAction of a token bucket filled every
// period with the TTL of the configuration; the response carries one
// action per reported bucket, for the bucket ids reported.
func TestProtocolSubscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := newService(t)
		f := open(t, q, "")
		other := map[string]string{"tenant": "b", "name": "api"}
		r := f.report(t, "edge", usage(api, 1, 0), usage(other, 1, 0))
		if len(r.GetBucketAction()) != 2 {
			t.Fatalf("%d actions, want 2: %v", len(r.GetBucketAction()), r)
		}
		for i, want := range []map[string]string{api, other} {
			a := r.GetBucketAction()[i]
			if fmt.Sprint(a.GetBucketId().GetBucket()) != fmt.Sprint(want) {
				t.Errorf("action %d for %v, want %v", i, a.GetBucketId().GetBucket(), want)
			}
			qa := a.GetQuotaAssignmentAction()
			tb := qa.GetRateLimitStrategy().GetTokenBucket()
			if qa.GetAssignmentTimeToLive().AsDuration() != 2*time.Second || tb == nil ||
				tb.GetFillInterval().AsDuration() != time.Second || tb.GetTokensPerFill().GetValue() != alone || tb.GetMaxTokens() < 2 {
				t.Errorf("action %d = %v, want a token bucket of %d per 1s living 2s", i, qa, alone)
			}
		}
	})
}

// TestProtocolDomain: a stream's first report must name its domain, and
// a later one may not name another.
func TestProtocolDomain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := newService(t)
		if got := open(t, q, "").ended(t, "", usage(api, 1, 0)); got != codes.InvalidArgument {
			t.Errorf("a first report without a domain ended the stream with %v, want InvalidArgument", got)
		}
		f := open(t, q, "")
		f.report(t, "edge", usage(api, 1, 0))
		f.report(t, "", usage(api, 1, 0)) // the domain may be left out after the first
		if got := f.ended(t, "other", usage(api, 1, 0)); got != codes.InvalidArgument {
			t.Errorf("a report of another domain ended the stream with %v, want InvalidArgument", got)
		}
	})
}

// TestProtocolBadIDs: an id without entries, or with an empty key or
// value, ends the stream; an id over the bounds is answered DENY_ALL and
// not held.
func TestProtocolBadIDs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := newService(t)
		for _, id := range []map[string]string{{}, {"name": ""}, {"": "api"}} {
			if got := open(t, q, "").ended(t, "edge", usage(id, 1, 0)); got != codes.InvalidArgument {
				t.Errorf("id %v ended the stream with %v, want InvalidArgument", id, got)
			}
		}
		big := map[string]string{"name": "api", "tenant": string(make([]byte, 2000))}
		many := map[string]string{"name": "api"}
		for i := range 20 {
			many[fmt.Sprint("k", i)] = "v"
		}
		f := open(t, q, "")
		for _, id := range []map[string]string{big, many} {
			if got := share(f.report(t, "edge", usage(id, 1, 0)).GetBucketAction()[0]); got != -2 {
				t.Errorf("an oversize id (%d entries) was answered %d, want DENY_ALL", len(id), got)
			}
		}
	})
}

// TestProtocolBlankets: an unknown bucket or domain gets DENY_ALL with
// the TTL, a deny-listed actor DENY_ALL, a stream's bucket past
// max_buckets DENY_ALL; none takes a share from the others.
func TestProtocolBlankets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := newService(t)
		f := open(t, q, "")
		cases := []struct {
			name string
			id   map[string]string
			want int
		}{
			{"unknown", map[string]string{"name": "web"}, -2},
			{"deny-listed", map[string]string{"name": "api", "tenant": "evil"}, -2},
			{"first", map[string]string{"name": "api", "tenant": "1"}, alone},
			{"second", map[string]string{"name": "api", "tenant": "2"}, alone},
			{"overflow", map[string]string{"name": "api", "tenant": "3"}, -2}, // the deny-listed id is held too
		}
		for _, c := range cases {
			a := f.report(t, "edge", usage(c.id, 1, 0)).GetBucketAction()[0]
			if got := share(a); got != c.want {
				t.Errorf("%s: answered %d, want %d", c.name, got, c.want)
			}
			if ttl := a.GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration(); ttl != 2*time.Second {
				t.Errorf("%s: ttl %v, want 2s", c.name, ttl)
			}
		}
		g := open(t, q, "")
		if got := share(g.report(t, "other", usage(api, 1, 0)).GetBucketAction()[0]); got != -2 {
			t.Errorf("an unknown domain: answered %d, want DENY_ALL", got)
		}
	})
}

// TestProtocolFairShares: two edges of one bucket id divide its limit
// max-min fair by the demand they report: one that wants 10/s gets that
// (and a margin of 2/s), the other the rest but the reserve.
func TestProtocolFairShares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := newService(t)
		small, large := open(t, q, "small"), open(t, q, "large")
		small.report(t, "edge", usage(api, 1, 0))
		large.report(t, "edge", usage(api, 1, 0))
		for range 3 {
			time.Sleep(time.Second)
			s := share(small.report(t, "edge", usage(api, 10, 0)).GetBucketAction()[0])
			l := share(large.report(t, "edge", usage(api, 100, 150)).GetBucketAction()[0])
			if s+l > 100 {
				t.Errorf("shares %d + %d over the limit 100", s, l)
			}
		}
		s := share(small.report(t, "edge", usage(api, 0, 0)).GetBucketAction()[0])
		l := share(large.report(t, "edge", usage(api, 0, 0)).GetBucketAction()[0])
		if s != 12 || l != alone-12 {
			t.Errorf("shares %d and %d, want 12 and %d", s, l, alone-12)
		}
	})
}

// TestProtocolNewcomer: edges that arrive while the others hold all
// they may get a share of the reserve at once, not a DENY_ALL, and
// their fair share one report later, once the others have reported:
// the others shrink to make room. The shares never sum past the limit.
func TestProtocolNewcomer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := newService(t)
		names := []string{"a", "b", "new1", "new2"}
		edges := map[string]*fakeStream{}
		shares := map[string]int{}
		ask := func(name string, allowed, denied uint64) int {
			t.Helper()
			shares[name] = share(edges[name].report(t, "edge", usage(api, allowed, denied)).GetBucketAction()[0])
			sum := 0
			for _, s := range shares {
				sum += max(s, 0)
			}
			if sum > 100 {
				t.Errorf("after %s asked, the shares %v sum to %d: over the limit 100", name, shares, sum)
			}
			return shares[name]
		}
		for _, n := range names[:2] {
			edges[n] = open(t, q, n)
			ask(n, 1, 0)
		}
		for range 2 { // a and b want 200/s each: they hold all they may
			time.Sleep(time.Second)
			ask("a", 100, 100)
			ask("b", 100, 100)
		}
		for _, n := range names[2:] {
			edges[n] = open(t, q, n)
			if got := ask(n, 1, 0); got <= 0 {
				t.Errorf("%s, arriving while the others hold all they may: answered %d, want a share", n, got)
			}
		}
		time.Sleep(time.Second)
		for _, n := range names {
			ask(n, 100, 100)
		}
		fair := alone / 4
		for _, n := range names[2:] {
			if got := ask(n, 100, 100); got < fair-fair/40 || got > fair+fair/40 {
				t.Errorf("%s, one report after the others': share %d, want %d (its fair share, within 1/40)", n, got, fair)
			}
		}
	})
}

// TestProtocolReserveSetting: quota.reserve sets the part kept for
// newcomers: with 0.2 an edge alone holds 80 of 100/s and a newcomer
// gets half of the 20 left; with 0 an edge alone holds the whole limit,
// and a newcomer is refused (DENY_ALL) until the other reports again.
func TestProtocolReserveSetting(t *testing.T) {
	for _, tc := range []struct {
		reserve       string
		alone, second int // -2: DENY_ALL (see share)
	}{{"0.2", 80, 10}, {"0", 100, -2}} {
		t.Run("reserve="+tc.reserve, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := strings.Replace(protocolConfig, "quota:\n", "quota:\n  reserve: "+tc.reserve+"\n", 1)
				q := servicetest.New(t, cfg, server.Options{}).QuotaService()
				a, b := open(t, q, "a"), open(t, q, "b")
				a.report(t, "edge", usage(api, 1, 0))
				time.Sleep(time.Second)
				if got := share(a.report(t, "edge", usage(api, 100, 100)).GetBucketAction()[0]); got != tc.alone {
					t.Errorf("an edge alone wanting 200/s: share %d, want %d", got, tc.alone)
				}
				if got := share(b.report(t, "edge", usage(api, 1, 0)).GetBucketAction()[0]); got != tc.second {
					t.Errorf("a newcomer: share %d, want %d", got, tc.second)
				}
			})
		})
	}
}

// TestProtocolReportsCount: the admissions an edge reports count in the
// rule's state, so a per-request check of the same bucket sees them.
func TestProtocolReportsCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc, q := newService(t)
		f := open(t, q, "")
		f.report(t, "edge", usage(api, 100, 0))
		res, err := svc.Engine().Check(t.Context(), rules.Named("api", "name=api&tenant=a"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			t.Errorf("a check after 100 reported admissions of 100/s was allowed, want denied")
		}
	})
}

// TestProtocolAbandon: a bucket that reports no request for the idle
// time is abandoned and its share given back; a stream that sends
// nothing for that long is ended with DeadlineExceeded.
func TestProtocolAbandon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := newService(t)
		idle, busy := open(t, q, "idle"), open(t, q, "busy")
		idle.report(t, "edge", usage(api, 1, 0))
		busy.report(t, "edge", usage(api, 1, 0))
		for range 6 {
			time.Sleep(time.Second)
			idle.in <- &rlqspb.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(api, 0, 0)}}
			busy.report(t, "edge", usage(api, 200, 0))
		}
		synctest.Wait()
		abandoned := false
		for len(idle.out) > 0 {
			r := <-idle.out
			for _, a := range r.GetBucketAction() {
				abandoned = abandoned || share(a) == -3
			}
		}
		if !abandoned {
			t.Errorf("a bucket idle for 6s (idle 5s) was not abandoned")
		}
		if got := share(busy.report(t, "edge", usage(api, 200, 0)).GetBucketAction()[0]); got < alone-alone/40 {
			t.Errorf("after the other edge's bucket was abandoned, the busy one's share is %d, want %d (within the 1/40 kept)", got, alone)
		}
		time.Sleep(6 * time.Second)
		wantEnded(t, idle)
	})
}

// TestProtocolReconnect: an edge that opens a new stream under the same
// name keeps its share at once: its demand, not measured on the new
// stream yet, is the one the store holds for its name.
func TestProtocolReconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := newService(t)
		a, b := open(t, q, "a"), open(t, q, "b")
		a.report(t, "edge", usage(api, 1, 0))
		b.report(t, "edge", usage(api, 1, 0))
		time.Sleep(time.Second)
		had := share(a.report(t, "edge", usage(api, 30, 0)).GetBucketAction()[0])
		other := share(b.report(t, "edge", usage(api, 40, 0)).GetBucketAction()[0]) // 42 of 100: 26 free
		close(a.in)
		if err := <-a.done; err != nil {
			t.Fatalf("a stream closed by its client ended with %v, want nil", err)
		}
		time.Sleep(time.Second)
		a2 := open(t, q, "a")
		got := share(a2.report(t, "edge", usage(api, 30, 0)).GetBucketAction()[0])
		if got+other > 100 {
			t.Errorf("the reconnected edge got %d beside the other's %d: over the limit 100", got, other)
		}
		if had != 32 || got != had { // not the free part, as an edge of unknown demand would get
			t.Errorf("the edge had %d (want 32: 30/s and 2), and %d on its new stream; want it kept", had, got)
		}
	})
}

// TestProtocolFlood: a stream that reports thousands of distinct ids
// holds max_buckets of them; the others are answered DENY_ALL and
// forgotten (a full stream answers overflow before it looks an id up, so
// the junk ids after the third are overflow too), so the stream's memory
// and the metrics' series stay bounded.
func TestProtocolFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc, q := newService(t)
		f := open(t, q, "")
		var us []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage
		for i := range 5000 {
			us = append(us, usage(map[string]string{"name": "api", "tenant": fmt.Sprint(i)}, 1, 0))
			if i%2 == 1 {
				us = append(us, usage(map[string]string{"name": fmt.Sprint("junk", i)}, 1, 0))
			}
		}
		r := f.report(t, "edge", us...)
		shares := 0
		for _, a := range r.GetBucketAction() {
			if share(a) > 0 {
				shares++
			}
		}
		if len(r.GetBucketAction()) != len(us) || shares != 3 {
			t.Errorf("%d actions of %d ids, %d shares; want one action per id and 3 shares (max_buckets)", len(r.GetBucketAction()), len(us), shares)
		}
		body := get(t, svc, "/metrics")
		for _, want := range []string{`sluice_quota_clients{bucket="api"} 3`, `sluice_quota_refused_total{reason="overflow"} 7496`, `sluice_quota_refused_total{reason="unknown"} 1`} {
			if !strings.Contains(body, want+"\n") {
				t.Errorf("metrics lack %q", want)
			}
		}
	})
}

// TestProtocolSilentClient: a stream that never reports is ended after
// the idle time, holding nothing.
func TestProtocolSilentClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := newService(t)
		f := open(t, q, "")
		time.Sleep(6 * time.Second)
		synctest.Wait()
		wantEnded(t, f)
	})
}

// wantEnded checks that f, silent for 6s (idle 5s), was ended with
// DeadlineExceeded.
func wantEnded(t *testing.T, f *fakeStream) {
	t.Helper()
	select {
	case err := <-f.done:
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("a stream silent for 6s ended with %v, want DeadlineExceeded", err)
		}
	default:
		t.Errorf("a stream silent for 6s (idle 5s) was not ended")
	}
}

// TestHTTPDoor: POST /v1/quota answers a holder's report with its share,
// a release with none, and a malformed report with 400.
func TestHTTPDoor(t *testing.T) {
	svc, _ := newService(t)
	tests := []struct {
		body, want string
		code       int
	}{
		{`{"domain":"edge","bucket":{"name":"api"},"holder":"go-1"}`, fmt.Sprintf(`"rate":%d`, alone), 200},
		{`{"domain":"edge","bucket":{"name":"api"},"holder":"go-2","allowed":10,"elapsed":1}`, `"rate":`, 200},
		{`{"domain":"edge","bucket":{"name":"web"},"holder":"go-1"}`, `"blanket":"deny","reason":"unknown"`, 200},
		{`{"domain":"edge","bucket":{"name":"api"},"holder":"go-1","release":true}`, `"rate":0`, 200},
		{`{"domain":"edge","bucket":{},"holder":"go-1"}`, `bucket:`, 400},
		{`{"domain":"edge","bucket":{"name":"api"},"holder":""}`, `holder:`, 400},
		{`{"domain":"edge","bucket":{"name":"api"},"holder":"x","elapsed":-1}`, `elapsed:`, 400},
		{`{"domain":`, ``, 400},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/quota", strings.NewReader(tt.body))
		req.Header.Set("Content-Type", "application/json")
		svc.Handler().ServeHTTP(rec, req)
		if rec.Code != tt.code || !strings.Contains(rec.Body.String(), tt.want) {
			t.Errorf("POST %s = %d %s, want %d with %s", tt.body, rec.Code, rec.Body.String(), tt.code, tt.want)
		}
	}
}

func get(t *testing.T, svc *server.Service, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	svc.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Body.String()
}

// TestStoreDown: while the store fails, each bucket is answered by its
// rule's failure policy: open a blanket ALLOW_ALL, closed a DENY_ALL,
// local the edge's last share, or for an edge without one a share of
// limit / failure.instances divided in the replica's memory.
func TestStoreDown(t *testing.T) {
	r := testserver.StartRedis(t)
	svc := servicetest.New(t, fmt.Sprintf(`store: {type: redis, redis: {addrs: [%q]}}
rules:
  - {name: open, limits: ["100/s"]}
  - {name: closed, limits: ["100/s"]}
  - {name: local, limits: ["100/s"]}
failure: {policy: local, timeout: 200ms, instances: 4, rules: {open: open, closed: closed}}
quota:
  report_interval: 1s
  ttl: 2s
  buckets:
    - {domain: edge, match: {name: open}, rule: open}
    - {domain: edge, match: {name: closed}, rule: closed}
    - {domain: edge, match: {name: local}, rule: local}
`, r.Addr), server.Options{})
	q := svc.QuotaService()
	ids := []map[string]string{{"name": "open"}, {"name": "closed"}, {"name": "local"}}
	f := open(t, q, "a")
	for i, a := range f.report(t, "edge", usage(ids[0], 1, 0), usage(ids[1], 1, 0), usage(ids[2], 1, 0)).GetBucketAction() {
		if got := share(a); got != alone {
			t.Fatalf("%v with the store up: answered %d, want %d", ids[i], got, alone)
		}
	}
	r.Stop()
	want := []int{-1, -2, alone}
	for i, a := range f.report(t, "edge", usage(ids[0], 1, 0), usage(ids[1], 1, 0), usage(ids[2], 1, 0)).GetBucketAction() {
		if got := share(a); got != want[i] {
			t.Errorf("%v with the store down: answered %d, want %d", ids[i], got, want[i])
		}
	}
	g := open(t, q, "b")
	if got := share(g.report(t, "edge", usage(ids[2], 1, 0)).GetBucketAction()[0]); got != 25-2 {
		t.Errorf("a new edge of the local rule with the store down: answered %d, want 23 (100 / 4 instances, less the reserve)", got)
	}
}

// TestProtocolHeldBound: streams of distinct ids hold at most
// Config.MaxHeld ids between them; past it, overflow; an ended stream's
// ids are free again.
func TestProtocolHeldBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc, _ := newService(t)
		q, err := rlqs.New(rlqs.Config{Config: svc.Config, Engine: svc.Engine, Store: memory.New(memory.Config{SweepInterval: -1}), MaxHeld: 4})
		if err != nil {
			t.Fatal(err)
		}
		var streams []*fakeStream
		shares := 0
		for i := range 4 {
			f := open(t, q, "")
			streams = append(streams, f)
			for j := range 2 {
				id := map[string]string{"name": "api", "tenant": fmt.Sprint(i, "-", j)}
				if share(f.report(t, "edge", usage(id, 1, 0)).GetBucketAction()[0]) > 0 {
					shares++
				}
			}
		}
		if shares != 4 {
			t.Errorf("4 streams of 2 ids each got %d shares, want 4 (MaxHeld)", shares)
		}
		close(streams[0].in)
		<-streams[0].done
		id := map[string]string{"name": "api", "tenant": "late"}
		if got := share(streams[3].report(t, "edge", usage(id, 1, 0)).GetBucketAction()[0]); got != alone {
			t.Errorf("after a stream of 2 ids ended, a new id got %d, want %d", got, alone)
		}
	})
}
