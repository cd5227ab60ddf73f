package rlqs

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"math"
	"strings"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// ClientHeader is the gRPC metadata that names an edge across its
// streams (Envoy's grpc_service.initial_metadata): a reconnecting edge
// that sends the same name takes its share back at once, where an
// unnamed stream is a new holder whose predecessor's share counts until
// its TTL. 1 to MaxClientLen printable ASCII bytes; anything else is
// ignored. Names must be unique per edge: two edges of one name share one
// holder's share between them.
const ClientHeader = "x-sluice-client"

// MaxClientLen is the longest ClientHeader value used.
const MaxClientLen = 48

// A stream is the state of one RLQS stream: its domain (set by its first
// report), its holder name, and the buckets it holds.
type stream struct {
	s       *Service
	srv     rlqspb.RateLimitQuotaService_StreamRateLimitQuotasServer
	holder  string
	domain  string
	buckets map[bucketID]*held
	lastMsg time.Time
}

// A held bucket is a bucket id a stream subscribed to, and what the
// service last assigned it.
type held struct {
	id *rlqspb.BucketId
	// active is the time of its last report with requests: a bucket
	// idle for config.Quota.Idle is abandoned.
	active time.Time
	// since starts the measure of its demand, of allowed and denied
	// requests; perSecond is the latest measure (or UnknownDemand).
	since           time.Time
	allowed, denied uint64
	perSecond       float64
	// answer is the last answer sent; rule and limit those of its share.
	answer answer
	rule   string
	limit  sluice.Limit
}

// StreamRateLimitQuotas serves one stream of an RLQS client (Envoy's
// rate_limit_quota filter): each report is answered with one action per
// bucket it reports, in one response; buckets idle for the quota
// section's idle time are abandoned. See the package documentation for
// the protocol's rules and the answers to bad input.
func (s *Service) StreamRateLimitQuotas(srv rlqspb.RateLimitQuotaService_StreamRateLimitQuotasServer) error {
	ctx := srv.Context()
	st := &stream{s: s, srv: srv, holder: holderOf(ctx), buckets: map[bucketID]*held{}, lastMsg: s.c.Clock()}
	s.c.Metrics.stream(1)
	defer st.close()
	msgs := make(chan *rlqspb.RateLimitQuotaUsageReports)
	errc := make(chan error, 1)
	go func() {
		for {
			m, err := srv.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	tick := time.NewTicker(quotaOf(s.c.Config()).ReportInterval)
	defer tick.Stop()
	for {
		var err error
		select {
		case m := <-msgs:
			err = st.handle(ctx, m)
		case <-tick.C:
			err = st.tick(ctx)
		case err = <-errc:
			if errors.Is(err, io.EOF) {
				return nil
			}
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		if err != nil {
			return err
		}
	}
}

// holderOf returns the holder name of a stream: its client's name
// (ClientHeader), else a random one of its own.
func holderOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(ClientHeader); len(v) == 1 && validClient(v[0]) {
		return "c:" + v[0]
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "s:" + base64.RawURLEncoding.EncodeToString(b[:])
}

// validClient reports whether name is 1 to MaxClientLen printable ASCII
// bytes.
func validClient(name string) bool {
	if len(name) == 0 || len(name) > MaxClientLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x21 || name[i] > 0x7e {
			return false
		}
	}
	return true
}

// quotaOf returns the quota section of c, with the defaults of a
// configuration that has none (whose buckets are all unknown).
func quotaOf(c *config.Config) *config.Quota {
	if c.Quota.TTL != 0 {
		return &c.Quota
	}
	return &config.Quota{ReportInterval: config.DefaultReportInterval, TTL: 3 * config.DefaultReportInterval,
		Burst: config.DefaultReportInterval / 10, Idle: config.DefaultQuotaIdle, MaxBuckets: config.DefaultMaxBuckets}
}

// handle answers one message of the stream.
func (st *stream) handle(ctx context.Context, m *rlqspb.RateLimitQuotaUsageReports) error {
	now := st.s.c.Clock()
	st.lastMsg = now
	switch {
	case st.domain == "" && m.GetDomain() == "":
		return status.Error(codes.InvalidArgument, "rlqs: the first report of a stream must name its domain")
	case st.domain == "":
		st.domain = m.GetDomain()
	case m.GetDomain() != "" && m.GetDomain() != st.domain:
		return status.Errorf(codes.InvalidArgument, "rlqs: the domain changed from %.64q to %.64q: open a new stream for another domain", st.domain, m.GetDomain())
	}
	q := quotaOf(st.s.c.Config())
	acts := make([]*rlqspb.RateLimitQuotaResponse_BucketAction, 0, len(m.GetBucketQuotaUsages()))
	for _, u := range m.GetBucketQuotaUsages() {
		a, err := st.usage(ctx, q, u, now)
		if err != nil {
			return err
		}
		acts = append(acts, a)
	}
	return st.send(acts)
}

// send sends acts in one response, if there are any.
func (st *stream) send(acts []*rlqspb.RateLimitQuotaResponse_BucketAction) error {
	if len(acts) == 0 {
		return nil
	}
	return st.srv.Send(&rlqspb.RateLimitQuotaResponse{BucketAction: acts})
}

// usage answers the report u of one bucket at now.
func (st *stream) usage(ctx context.Context, q *config.Quota, u *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage, now time.Time) (*rlqspb.RateLimitQuotaResponse_BucketAction, error) {
	id := u.GetBucketId().GetBucket()
	fits, valid := idSize(id)
	switch {
	case !valid:
		return nil, status.Error(codes.InvalidArgument, "rlqs: a report of a bucket without an id, or with an empty key or value")
	case !fits:
		return st.untracked(u.GetBucketId(), st.s.blanket(q, "", reasonOversize)), nil
	}
	key := keyOf(id)
	b := st.buckets[key]
	if b == nil {
		if len(st.buckets) >= q.MaxBuckets || !st.s.hold() {
			return st.untracked(u.GetBucketId(), st.s.blanket(q, "", reasonOverflow)), nil
		}
		b = &held{id: u.GetBucketId(), active: now, since: now, perSecond: st.firstDemand()}
		st.buckets[key] = b
	} else {
		b.measure(q, u, now)
	}
	r := &request{domain: st.domain, id: id, key: key, holder: st.holder, allowed: u.GetNumRequestsAllowed(),
		denied: u.GetNumRequestsDenied(), perSecond: b.perSecond}
	if b.answer.kind == assign {
		r.last = b.answer.rate
	}
	a := st.s.assign(ctx, r)
	st.moved(ctx, key, b, &a)
	if a.bucket == "" { // unknown, now: not held
		delete(st.buckets, key)
		st.s.held.Add(-1)
		st.s.c.Metrics.hold(&b.answer, nil)
	}
	return action(b.id, a), nil
}

// untracked returns the action of a, for a bucket the stream does not
// hold.
func (st *stream) untracked(id *rlqspb.BucketId, a answer) *rlqspb.RateLimitQuotaResponse_BucketAction {
	st.s.c.Metrics.sent(a)
	return action(id, a)
}

// moved records a, the new answer of the held bucket b of key: the
// metrics, and the release of a share of another rule it held before
// (the configuration changed).
func (st *stream) moved(ctx context.Context, key bucketID, b *held, a *answer) {
	st.s.c.Metrics.sent(*a)
	old := b.answer
	first := old == (answer{})
	if !first && old.kind == assign && a.rule != b.rule {
		st.s.release(ctx, b.rule, b.limit, key, st.holder)
	}
	if first {
		st.s.c.Metrics.hold(nil, a)
	} else {
		st.s.c.Metrics.hold(&old, a)
	}
	b.answer, b.rule, b.limit = *a, a.rule, a.limit
}

// measure adds the report u to b's measure of demand, and ends the
// measure once it spans three quarters of a report interval: the demand
// is then that of the requests counted over the time since it began
// (demandOf). A report sooner than that after the last measure (a client
// that reports as it applies an assignment, or a report timer that fired
// late and then on time) adds to the next measure, so that no measure
// spans a sliver of time.
func (b *held) measure(q *config.Quota, u *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage, now time.Time) {
	if u.GetNumRequestsAllowed() > 0 || u.GetNumRequestsDenied() > 0 {
		b.active = now
	}
	b.allowed = addSat(b.allowed, u.GetNumRequestsAllowed())
	b.denied = addSat(b.denied, u.GetNumRequestsDenied())
	elapsed := now.Sub(b.since)
	if elapsed < q.ReportInterval*3/4 {
		return
	}
	b.perSecond = demandOf(float64(b.allowed)+float64(b.denied), elapsed.Seconds())
	b.allowed, b.denied, b.since = 0, 0, now
}

// firstDemand is the demand of the first report of a bucket on a
// stream: a named edge (ClientHeader) keeps the demand the store holds
// for it, so that an edge that reconnects (to any replica) keeps its
// share; it is unknown for a newcomer and for unnamed streams.
func (st *stream) firstDemand() float64 {
	if strings.HasPrefix(st.holder, "c:") {
		return sluice.KeepDemand
	}
	return sluice.UnknownDemand
}

func addSat(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}

// tick abandons the buckets idle for the quota section's idle time, and
// ends a stream that sent nothing for as long.
func (st *stream) tick(ctx context.Context) error {
	now := st.s.c.Clock()
	q := quotaOf(st.s.c.Config())
	if now.Sub(st.lastMsg) >= q.Idle {
		return status.Errorf(codes.DeadlineExceeded, "rlqs: no report for %v", q.Idle)
	}
	var acts []*rlqspb.RateLimitQuotaResponse_BucketAction
	for key, b := range st.buckets {
		if now.Sub(b.active) < q.Idle {
			continue
		}
		acts = append(acts, abandon(b.id))
		if b.answer.kind == assign {
			st.s.release(ctx, b.rule, b.limit, key, st.holder)
		}
		st.s.c.Metrics.abandoned(b.answer.bucket)
		st.s.c.Metrics.hold(&b.answer, nil)
		delete(st.buckets, key)
		st.s.held.Add(-1)
	}
	return st.send(acts)
}

// close counts the stream's buckets out of the metrics. Their shares are
// not given back: the edge may still apply them until their TTL, when
// the store stops counting them.
func (st *stream) close() {
	for _, b := range st.buckets {
		st.s.c.Metrics.hold(&b.answer, nil)
	}
	st.s.held.Add(-int64(len(st.buckets)))
	st.s.c.Metrics.stream(-1)
}
