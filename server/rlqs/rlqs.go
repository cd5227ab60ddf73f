package rlqs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"sync/atomic"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/server/rules"
)

// Config configures a Service. The zero value of each field but Config,
// Engine and Store means its default.
type Config struct {
	// Config returns the configuration in force: its quota section, its
	// rules' limits and failure policies. Asked at every report, so a
	// reload takes effect at the next. Required.
	Config func() *config.Config
	// Engine returns the rules engine in force: reported admissions are
	// inserted into the rule's state through it. Required.
	Engine func() *rules.Engine
	// Guard returns the guard in force, which judges each bucket's actor
	// before its rule. Default nil: none.
	Guard func() *guard.Guard
	// OnGuard, when set, is told of each verdict of the guard other than
	// Pass, with the bucket's rule: for metrics. Default nil.
	OnGuard func(rule string, a guard.Action)
	// Store divides the limits among the holders: the service's store,
	// shared by its replicas. Required.
	Store sluice.QuotaStore
	// Shared marks a Store that may fail (Redis, memcached): each call is
	// then bounded by the configuration's failure.timeout, and a failure
	// answered by the rule's failure policy. Default false: the memory
	// store, which cannot fail.
	Shared bool
	// Local divides the limits of the rules that fail local while Store
	// fails, each limit divided by failure.instances. Required when
	// Shared.
	Local sluice.QuotaStore
	// Namespace prefixes every key, as for the rules. Default "sluice".
	Namespace string
	// Metrics, when set, counts streams, buckets, reports and answers.
	Metrics *Metrics
	// Logger receives store failures and refused streams, throttled by
	// the caller's handler. Default slog.Default().
	Logger *slog.Logger
	// Clock measures demand and idleness. Default time.Now. (Shares are
	// dated by the store's clock.)
	Clock func() time.Time
	// MaxHeld bounds the bucket ids all streams hold at once. Default
	// MaxHeld.
	MaxHeld int64
}

// A Service is Envoy's Rate Limit Quota Service
// (envoy.service.rate_limit_quota.v3.RateLimitQuotaService) and the
// HTTP door of the same quotas for other clients (POST /v1/quota), over
// the rules of a configuration. See the package documentation. Create
// Services with New; the zero value is not usable. A Service is safe for
// concurrent use.
type Service struct {
	rlqspb.UnimplementedRateLimitQuotaServiceServer
	c    Config
	log  *slog.Logger
	held atomic.Int64 // bucket ids held by all streams: at most MaxHeld
}

// MaxHeld bounds the bucket ids all the streams of a Service hold at
// once (each stream holds at most the quota section's max_buckets): a
// flood of streams of distinct ids is answered overflow beyond it, so
// that their memory stays within MaxHeld ids of config.MaxBucketBytes.
const MaxHeld = 100_000

// hold counts one more bucket id held, and reports false (counting
// none) when Config.MaxHeld are.
func (s *Service) hold() bool {
	if s.held.Add(1) > s.c.MaxHeld {
		s.held.Add(-1)
		return false
	}
	return true
}

var _ rlqspb.RateLimitQuotaServiceServer = (*Service)(nil)

// New returns a Service for c.
func New(c Config) (*Service, error) {
	switch {
	case c.Config == nil || c.Engine == nil || c.Store == nil:
		return nil, fmt.Errorf("rlqs: %w: Config, Engine and Store are required", sluice.ErrInvalidRequest)
	case c.Shared && c.Local == nil:
		return nil, fmt.Errorf("rlqs: %w: a shared store needs a Local one", sluice.ErrInvalidRequest)
	}
	if c.Namespace == "" {
		c.Namespace = "sluice"
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.MaxHeld <= 0 {
		c.MaxHeld = MaxHeld
	}
	s := &Service{c: c, log: c.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s, nil
}

// Register registers the service on a gRPC server (sluice serve's gRPC
// listener, beside Envoy's rate limit service).
func (s *Service) Register(g *grpc.Server) { rlqspb.RegisterRateLimitQuotaServiceServer(g, s) }

// A kind is what an answer tells the edge to do with a bucket.
type kind uint8

const (
	assign   kind = iota // a token bucket of the holder's share
	allowAll             // a blanket ALLOW_ALL
	denyAll              // a blanket DENY_ALL
)

// Reasons of the blanket answers, as metrics and the HTTP door name them.
const (
	reasonUnknown  = "unknown"    // no configured bucket matches
	reasonOverflow = "overflow"   // the stream holds MaxBuckets already
	reasonOversize = "oversize"   // the id is over the bounds
	reasonFull     = "full"       // the key's table has no room for another holder
	reasonEmpty    = "no-share"   // the others hold the whole limit, for now
	reasonStore    = "store"      // the store failed: the rule's policy (open or closed)
	reasonAllow    = "allow-list" // the guard exempts the actor
	reasonDeny     = "deny-list"  // the guard refuses the actor
	reasonBanned   = "banned"     // the actor is banned
)

// An answer is what the service tells a holder about one bucket.
type answer struct {
	kind   kind
	reason string        // why a blanket; "" for an assignment
	bucket string        // the configured bucket's name; "" when unknown
	rule   string        // its rule
	limit  sluice.Limit  // the rule's limit
	rate   int           // the share: units per period (assign)
	period time.Duration // the rule's period
	tokens int           // the token bucket's size (assign)
	ttl    time.Duration
	local  bool // the share came from Local or the last known one: the store failed
}

// A request is one report of one bucket by one holder, through either
// door.
type request struct {
	domain string
	id     map[string]string
	key    bucketID
	holder string
	// allowed and denied are the requests the holder reports, counted
	// into the rule's state and the metrics.
	allowed, denied uint64
	// perSecond is the holder's demand in requests a second, or
	// sluice.UnknownDemand before it is measured (sluice.KeepDemand: the
	// demand the store holds for the holder).
	perSecond float64
	// last is the share the holder was assigned last (0: none): kept
	// while the store fails under FailLocal, and given back when the
	// guard turns the bucket away.
	last int
}

// assign answers r: the bucket's configured mapping, the guard, the
// report counted into the rule, then the holder's share from the store
// under the rule's failure policy.
func (s *Service) assign(ctx context.Context, r *request) answer {
	cfg := s.c.Config()
	q := quotaOf(cfg)
	b := match(q, r.domain, r.id)
	if b == nil {
		return s.blanket(q, "", reasonUnknown)
	}
	rule, _ := cfg.Rule(b.Rule)
	l := rule.Limits[0]
	a := answer{bucket: b.Name, rule: b.Rule, limit: l, period: l.Period, ttl: q.TTL}
	if reason := s.judge(b, r); reason != "" {
		if r.last > 0 {
			s.release(ctx, b.Rule, l, r.key, r.holder)
		}
		a.kind, a.reason = denyAll, reason
		if reason == reasonAllow {
			a.kind = allowAll
		}
		return a
	}
	s.report(ctx, b, r)
	demand := int(r.perSecond) // UnknownDemand or KeepDemand, until measured
	if r.perSecond >= 0 {
		demand = int(min(math.Ceil(r.perSecond*l.Period.Seconds()), sluice.MaxQuotaRate))
	}
	sh, err := s.share(ctx, cfg, q, b, l, r, demand)
	switch {
	case err != nil:
		return s.failed(cfg, q, b, r, a, err)
	case sh.Full:
		a.kind, a.reason = denyAll, reasonFull
		return a
	}
	return s.assignment(a, q, sh.Rate)
}

// assignment returns a with the token bucket of share rate, or a
// DENY_ALL when the share is empty (the others hold the whole limit,
// reserve included, until they report again: several newcomers within
// one report interval). The bucket holds the share of
// config.Quota.Burst, and at least two tokens (one for a share of one),
// so that arrivals a little early are not refused for want of a token
// that a little later would have refilled.
func (s *Service) assignment(a answer, q *config.Quota, rate int) answer {
	if rate <= 0 {
		a.kind, a.reason = denyAll, reasonEmpty
		return a
	}
	a.kind, a.rate = assign, rate
	a.tokens = max(min(2, rate), int(math.Ceil(float64(rate)*float64(q.Burst)/float64(a.period))))
	return a
}

// blanket returns the blanket answer of q's unknown buckets, for reason.
func (s *Service) blanket(q *config.Quota, bucket, reason string) answer {
	a := answer{kind: denyAll, reason: reason, bucket: bucket, ttl: q.TTL}
	if q.AllowUnknown {
		a.kind = allowAll
	}
	return a
}

// judge asks the guard about the actor of r under bucket b, and returns
// the reason of its verdict, or "" when the rule decides.
func (s *Service) judge(b *config.QuotaBucket, r *request) string {
	if s.c.Guard == nil {
		return ""
	}
	g := s.c.Guard()
	if g == nil {
		return ""
	}
	key := string(r.key)
	if v, ok := r.id[b.Actor]; ok && b.Actor != "" {
		key = v
	}
	v := g.Check(guard.NewActor(netip.Addr{}, key))
	if v.Action != guard.Pass && s.c.OnGuard != nil {
		s.c.OnGuard(b.Rule, v.Action)
	}
	switch v.Action {
	case guard.Exempt:
		return reasonAllow
	case guard.Refuse:
		return reasonDeny
	case guard.Banned:
		return reasonBanned
	}
	return ""
}

// report counts the requests r reports in the metrics and, its
// admissions, in the rule's state (an insert, at most the rule's
// largest cost at once), as if the rule had decided them.
func (s *Service) report(ctx context.Context, b *config.QuotaBucket, r *request) {
	s.c.Metrics.reported(b.Name, r.allowed, r.denied)
	if r.allowed == 0 {
		return
	}
	e := s.c.Engine()
	ru := e.Rule(b.Rule)
	if ru == nil || ru.MaxCost() < 1 {
		return
	}
	req := rules.Named(b.Rule, string(r.key))
	req.Op, req.Cost = sluice.OpInsert, int(min(r.allowed, uint64(ru.MaxCost())))
	if _, err := e.Check(ctx, req); err != nil && !errors.Is(err, context.Canceled) {
		s.log.WarnContext(ctx, "quota: reported admissions not counted in the rule", "bucket", b.Name, "err", err)
	}
}

// reserveOf returns the units of l kept for newcomers (see
// config.Quota.Reserve): the part q.Reserve of its rate rounded up, at
// most half of it (less a hair before rounding up: 0.1 × 30 is 3 in
// decimals, a little more in binary).
func reserveOf(l sluice.Limit, q *config.Quota) int {
	return min(int(math.Ceil(float64(l.Rate)*q.Reserve-1e-9)), l.Rate/2)
}

// prefix is the prefix of the tables of shares of rule: the named rule's
// own (the tables' state ID keeps them apart from its states).
func (s *Service) prefix(rule string) string { return s.c.Namespace + ":" + rule + ":" }

// share asks the store for r's holder's share of l, with demand, under
// the failure timeout of a shared store.
func (s *Service) share(ctx context.Context, cfg *config.Config, q *config.Quota, b *config.QuotaBucket, l sluice.Limit, r *request, demand int) (sluice.Share, error) {
	req := sluice.ShareRequest{Prefix: s.prefix(b.Rule), Key: string(r.key), Holder: r.holder, Limit: l,
		Reserve: reserveOf(l, q), Demand: demand, TTL: q.TTL}
	if !s.c.Shared {
		return s.c.Store.Share(ctx, req)
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.Failure.Timeout)
	defer cancel()
	sh, err := s.c.Store.Share(cctx, req)
	if err != nil && ctx.Err() == nil {
		return sh, fmt.Errorf("%w: %w", sluice.ErrStore, err)
	}
	return sh, err
}

// failed answers r while the store fails (err), by the rule's failure
// policy: FailOpen a blanket ALLOW_ALL, FailClosed a DENY_ALL, FailLocal
// the holder's last share if it has one, else a share from Local of the
// limit divided by failure.instances.
func (s *Service) failed(cfg *config.Config, q *config.Quota, b *config.QuotaBucket, r *request, a answer, err error) answer {
	s.log.Warn("quota: store failed: answering by failure policy", "bucket", b.Name, "policy", cfg.Failure.PolicyOf(b.Rule).String(), "err", err)
	s.c.Metrics.storeFailed(b.Name)
	a.local = true
	switch cfg.Failure.PolicyOf(b.Rule) {
	case sluice.FailOpen:
		a.kind, a.reason = allowAll, reasonStore
		return a
	case sluice.FailClosed:
		a.kind, a.reason = denyAll, reasonStore
		return a
	}
	if r.last > 0 {
		return s.assignment(a, q, r.last)
	}
	local := a.limit
	local.Rate = max(1, local.Rate/max(cfg.Failure.Instances, 1))
	sh, lerr := s.c.Local.Share(context.Background(), sluice.ShareRequest{Prefix: s.prefix(b.Rule), Key: string(r.key),
		Holder: r.holder, Limit: local, Reserve: reserveOf(local, q), Demand: sluice.UnknownDemand, TTL: q.TTL})
	if lerr != nil || sh.Full {
		a.kind, a.reason = denyAll, reasonStore
		return a
	}
	return s.assignment(a, q, sh.Rate)
}

// release gives back the share holder holds of key under rule's limit
// l (a bucket the guard now turns away, an abandoned one, one whose
// mapping changed). Errors are logged: the share then expires at its
// TTL.
func (s *Service) release(ctx context.Context, rule string, l sluice.Limit, key bucketID, holder string) {
	req := sluice.ShareRequest{Prefix: s.prefix(rule), Key: string(key), Holder: holder, Limit: l, Release: true}
	cctx, cancel := context.WithTimeout(ctx, cmp.Or(s.c.Config().Failure.Timeout, config.DefaultFailureTimeout))
	defer cancel()
	if _, err := s.c.Store.Share(cctx, req); err != nil {
		s.log.WarnContext(ctx, "quota: a share not given back: it expires at its TTL", "rule", rule, "err", err)
	}
}
