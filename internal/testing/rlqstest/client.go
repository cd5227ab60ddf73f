// Package rlqstest is an RLQS client for tests that behaves as Envoy's
// rate_limit_quota filter does (its global client, in
// source/extensions/filters/http/rate_limit_quota of Envoy): it opens one
// stream per client when the first request matches a bucket, reports that
// bucket at once (its first request counted), then every bucket every
// reporting interval (with time_elapsed in whole seconds, as Envoy
// sends it); it applies the no-assignment behaviour until a bucket's
// first assignment, a token bucket (full when new, carried over when the
// same strategy is assigned again) or a blanket rule until the
// assignment's TTL (whole seconds, as Envoy reads it), then the expired
// behaviour for its timeout, then the no-assignment behaviour again;
// an abandon action erases the bucket, whose next request subscribes
// again; a closed stream is opened again at the next report, on the next
// of its targets (as Envoy's cluster would pick another host).
//
// It is built on go-control-plane's generated stubs, and records what
// it did for the tests to check.
package rlqstest

import (
	"context"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Config configures a Client, as Envoy's filter configuration would.
type Config struct {
	// Targets are the addresses of the RLQS servers, host:port: the
	// client streams to one, and to the next when its stream fails.
	Targets []string
	// Domain is the filter's domain.
	Domain string
	// Interval is the reporting_interval. Default 1s.
	Interval time.Duration
	// NoAssignment is the no_assignment_behavior's fallback_rate_limit.
	// Default nil: allow every request.
	NoAssignment *typev3.RateLimitStrategy
	// Expired is the expired_assignment_behavior. Default nil: an
	// expired assignment falls back to the no-assignment behaviour.
	Expired *Expired
	// Metadata is added to every stream (Envoy's
	// grpc_service.initial_metadata).
	Metadata map[string]string
	// Clock is the time of decisions, of received actions and of
	// reports (not of the reporting timer). Default time.Now.
	Clock func() time.Time
	// OnAction, when set, is called with each bucket action received,
	// after the client applied it, with the client's lock held: for
	// tests to wait on. Default nil.
	OnAction func(Received)
}

// Expired is the expired_assignment_behavior of a Config: for Timeout
// after an assignment expires, Fallback applies, or the last assignment
// when ReuseLast.
type Expired struct {
	Timeout   time.Duration
	Fallback  *typev3.RateLimitStrategy
	ReuseLast bool
}

// A Client is one Envoy's filter: safe for concurrent use.
type Client struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	conns   []*grpc.ClientConn
	target  int // of conns, the one streamed to
	stream  rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient
	started bool
	buckets map[string]*bucket
	log     Log
}

// Log is what a Client did: counts, and every action it received.
type Log struct {
	// Streams counts the streams opened, Reports the messages sent,
	// StreamErrors the streams that ended with an error.
	Streams, Reports, StreamErrors int
	// Actions are the bucket actions received, in order, with the key
	// of their bucket (Key) and when.
	Actions []Received
	// Sent are the reports sent, in order.
	Sent []Sent
}

// Sent is one report a Client sent, and when (by its Clock).
type Sent struct {
	At     time.Time
	Report *rlqspb.RateLimitQuotaUsageReports
}

// Received is one bucket action a Client received.
type Received struct {
	Key    string
	At     time.Time
	Action *rlqspb.RateLimitQuotaResponse_BucketAction
}

// bucket is what the filter keeps of one bucket id.
type bucket struct {
	id              *rlqspb.BucketId
	allowed, denied uint64
	lastReport      time.Time
	action          *rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction // nil: no assignment
	expires         time.Time
	fallbackUntil   time.Time    // expired behaviour applies until then
	tb              *tokenBucket // of the assignment
	fb              *tokenBucket // of a fallback strategy
}

// New returns a Client of c. It connects to no server until its first
// request, as the filter.
func New(c Config) (*Client, error) {
	if c.Interval == 0 {
		c.Interval = time.Second
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	cl := &Client{cfg: c, buckets: map[string]*bucket{}}
	cl.ctx, cl.cancel = context.WithCancel(context.Background())
	for _, t := range c.Targets {
		conn, err := grpc.NewClient(t, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			cl.Close()
			return nil, err
		}
		cl.conns = append(cl.conns, conn)
	}
	return cl, nil
}

// Close stops the reports, closes the stream and the connections.
func (c *Client) Close() {
	c.cancel()
	c.wg.Wait()
	for _, conn := range c.conns {
		conn.Close()
	}
}

// Key returns the key of a bucket id as the Log names it: its entries
// sorted, k=v joined by commas.
func Key(id map[string]string) string {
	ks := make([]string, 0, len(id))
	for k, v := range id {
		ks = append(ks, k+"="+v)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// Allow decides one request matched into the bucket id, as the filter
// does, and counts it for the next report.
func (c *Client) Allow(id map[string]string) bool {
	now := c.cfg.Clock()
	key := Key(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buckets[key]
	if b == nil {
		b = &bucket{id: &rlqspb.BucketId{Bucket: id}, lastReport: now}
		c.buckets[key] = b
		ok := b.decide(&c.cfg, now)
		b.count(ok)
		c.startLocked()
		c.sendLocked(c.reportLocked([]*bucket{b}, now)) // the subscription
		return ok
	}
	ok := b.decide(&c.cfg, now)
	b.count(ok)
	return ok
}

func (b *bucket) count(ok bool) {
	if ok {
		b.allowed++
	} else {
		b.denied++
	}
}

// decide applies the bucket's strategy in force at now.
func (b *bucket) decide(c *Config, now time.Time) bool {
	switch {
	case b.action != nil && now.Before(b.expires):
		return decide(b.action.GetRateLimitStrategy(), &b.tb, now)
	case b.action != nil && c.Expired != nil && now.Before(b.fallbackUntil):
		if c.Expired.ReuseLast {
			return decide(b.action.GetRateLimitStrategy(), &b.tb, now)
		}
		return decide(c.Expired.Fallback, &b.fb, now)
	}
	return decide(c.NoAssignment, &b.fb, now)
}

// decide applies strategy st (nil: allow all), with the token bucket
// *tb of a TokenBucket strategy (made full when nil).
func decide(st *typev3.RateLimitStrategy, tb **tokenBucket, now time.Time) bool {
	switch {
	case st == nil:
		return true
	case st.GetTokenBucket() != nil:
		if *tb == nil {
			*tb = newTokenBucket(st.GetTokenBucket(), now)
		}
		return (*tb).take(now)
	case st.GetRequestsPerTimeUnit() != nil:
		return true // Envoy's filter does not apply it
	}
	return st.GetBlanketRule() != typev3.RateLimitStrategy_DENY_ALL
}

// startLocked starts the stream and the reporting timer, once.
func (c *Client) startLocked() {
	if c.started {
		return
	}
	c.started = true
	c.openLocked()
	c.wg.Go(c.reportEvery)
}

// openLocked opens a stream to the current target, and its receiving
// goroutine; it reports false if it could not.
func (c *Client) openLocked() bool {
	if len(c.conns) == 0 {
		return false
	}
	ctx := c.ctx
	if len(c.cfg.Metadata) > 0 {
		var kv []string
		for k, v := range c.cfg.Metadata {
			kv = append(kv, k, v)
		}
		ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	}
	s, err := rlqspb.NewRateLimitQuotaServiceClient(c.conns[c.target]).StreamRateLimitQuotas(ctx)
	if err != nil {
		c.target = (c.target + 1) % len(c.conns)
		return false
	}
	c.stream = s
	c.log.Streams++
	c.wg.Go(func() { c.receive(s) })
	return true
}

// receive applies the responses of stream s until it ends.
func (c *Client) receive(s rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient) {
	for {
		resp, err := s.Recv()
		c.mu.Lock()
		if err != nil {
			if c.stream == s {
				c.stream = nil
				c.target = (c.target + 1) % len(c.conns)
			}
			if c.ctx.Err() == nil {
				c.log.StreamErrors++
			}
			c.mu.Unlock()
			return
		}
		c.applyLocked(resp, c.cfg.Clock())
		c.mu.Unlock()
	}
}

// applyLocked applies the actions of resp, as onQuotaResponseImpl does.
func (c *Client) applyLocked(resp *rlqspb.RateLimitQuotaResponse, now time.Time) {
	for _, a := range resp.GetBucketAction() {
		if len(a.GetBucketId().GetBucket()) == 0 {
			continue
		}
		r := Received{Key: Key(a.GetBucketId().GetBucket()), At: now, Action: a}
		c.log.Actions = append(c.log.Actions, r)
		c.applyOneLocked(r)
		if c.cfg.OnAction != nil {
			c.cfg.OnAction(r)
		}
	}
}

// applyOneLocked applies one action to its bucket, if the client holds
// it: an abandon erases the bucket; an assignment replaces the one in
// force (a token bucket carried over when it is the same one), unless
// its strategy is one the filter does not apply.
func (c *Client) applyOneLocked(r Received) {
	b := c.buckets[r.Key]
	if b == nil {
		return // not a bucket of ours
	}
	if r.Action.GetAbandonAction() != nil {
		delete(c.buckets, r.Key)
		return
	}
	qa := r.Action.GetQuotaAssignmentAction()
	st := qa.GetRateLimitStrategy()
	if st.GetStrategy() == nil || st.GetRequestsPerTimeUnit() != nil {
		return // Envoy logs an error and keeps what it had
	}
	if tb := st.GetTokenBucket(); tb != nil {
		if b.action == nil || !sameTokenBucket(b.action.GetRateLimitStrategy().GetTokenBucket(), tb) {
			b.tb = newTokenBucket(tb, r.At)
		}
	} else {
		b.tb = nil
	}
	b.action, b.fb = qa, nil
	b.expires = r.At.Add(time.Duration(qa.GetAssignmentTimeToLive().GetSeconds()) * time.Second)
	if c.cfg.Expired != nil {
		b.fallbackUntil = b.expires.Add(c.cfg.Expired.Timeout)
	}
}

// sameTokenBucket compares as Envoy's protoTokenBucketsEq does.
func sameTokenBucket(a, b *typev3.TokenBucket) bool {
	return a != nil && b != nil && a.GetMaxTokens() == b.GetMaxTokens() &&
		a.GetTokensPerFill().GetValue() == b.GetTokensPerFill().GetValue() &&
		proto.Equal(a.GetFillInterval(), b.GetFillInterval())
}

// reportEvery sends every bucket's report each interval, reopening the
// stream first if it ended.
func (c *Client) reportEvery() {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			now := c.cfg.Clock()
			c.mu.Lock()
			bs := make([]*bucket, 0, len(c.buckets))
			for _, b := range c.buckets {
				bs = append(bs, b)
			}
			r := c.reportLocked(bs, now)
			if c.stream != nil || c.openLocked() {
				c.sendLocked(r)
			}
			c.mu.Unlock()
		}
	}
}

// reportLocked builds the report of bs at now, resetting their counts.
func (c *Client) reportLocked(bs []*bucket, now time.Time) *rlqspb.RateLimitQuotaUsageReports {
	r := &rlqspb.RateLimitQuotaUsageReports{Domain: c.cfg.Domain}
	for _, b := range bs {
		r.BucketQuotaUsages = append(r.BucketQuotaUsages, &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId:           b.id,
			TimeElapsed:        &durationpb.Duration{Seconds: int64(now.Sub(b.lastReport) / time.Second)},
			NumRequestsAllowed: b.allowed,
			NumRequestsDenied:  b.denied,
		})
		b.allowed, b.denied, b.lastReport = 0, 0, now
	}
	return r
}

// sendLocked sends r on the stream, if one is open.
func (c *Client) sendLocked(r *rlqspb.RateLimitQuotaUsageReports) {
	if c.stream == nil {
		return
	}
	if err := c.stream.Send(r); err == nil {
		c.log.Reports++
		c.log.Sent = append(c.log.Sent, Sent{At: c.cfg.Clock(), Report: r})
	}
}

// Log returns a copy of what the client did so far.
func (c *Client) Log() Log {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.log
	l.Actions = append([]Received(nil), c.log.Actions...)
	l.Sent = append([]Sent(nil), c.log.Sent...)
	return l
}

// Assignment returns the assignment the bucket id is under at now (nil:
// none, or expired), and whether the client holds the bucket.
func (c *Client) Assignment(id map[string]string) (*rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buckets[Key(id)]
	if b == nil {
		return nil, false
	}
	if b.action == nil || !c.cfg.Clock().Before(b.expires) {
		return nil, true
	}
	return b.action, true
}

// A tokenBucket is Envoy's AtomicTokenBucketImpl: max tokens, full when
// made, filled continuously at tokens_per_fill per fill_interval (whole
// seconds, as Envoy reads them).
type tokenBucket struct {
	max, tokens, perSecond float64
	last                   time.Time
}

func newTokenBucket(tb *typev3.TokenBucket, now time.Time) *tokenBucket {
	secs := float64(tb.GetFillInterval().GetSeconds())
	perSecond := math.Inf(1)
	if secs > 0 {
		perSecond = float64(tb.GetTokensPerFill().GetValue()) / secs
	}
	return &tokenBucket{max: float64(tb.GetMaxTokens()), tokens: float64(tb.GetMaxTokens()), perSecond: perSecond, last: now}
}

func (t *tokenBucket) take(now time.Time) bool {
	t.tokens = math.Min(t.max, t.tokens+now.Sub(t.last).Seconds()*t.perSecond)
	t.last = now
	if t.tokens < 1 {
		return false
	}
	t.tokens--
	return true
}
