// Package grpclimit limits the calls a gRPC server accepts, as httplimit
// limits HTTP requests: server interceptors, unary and stream, that
// decide each call with the rules' limiters, keyed by the peer's address
// (IPv6 by its /64), a metadata value, the method, or a mix of them.
//
// A call over a limit is refused with RESOURCE_EXHAUSTED before its
// handler runs; the status carries a google.rpc.RetryInfo detail with
// the wait, which gRPC clients and retry policies read, and the
// response's metadata (headers and trailers) carries the IETF RateLimit
// fields and Retry-After in whole seconds, as httplimit writes them:
// "ratelimit-policy", "ratelimit" and "retry-after". An allowed call
// carries the RateLimit fields in its headers.
//
//	lim, err := grpclimit.New(grpclimit.Config{Rules: []grpclimit.Rule{{Name: "rpc", Limiter: perPeer}}})
//	...
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(lim.Unary()), grpc.ChainStreamInterceptor(lim.Stream()))
//
// When a limiter's store fails, the call goes through (the default,
// sluice.FailOpen) or, with Config.Failure sluice.FailClosed, is refused
// with UNAVAILABLE; either way the failures are logged, a few lines a
// second at most.
package grpclimit

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/logthrottle"
	"github.com/sluicehq/sluice/internal/ratelimitheader"
)

// A Rule limits the calls it matches, per key, with a Limiter.
type Rule struct {
	// Name identifies the rule in the RateLimit fields and logs;
	// printable ASCII without '"' or '\'. Default "default" for the first
	// rule, "rule2", "rule3"… for the others.
	Name string
	// Limiter decides: a *sluice.Limiter, or any httplimit.Decider (the
	// shared service's client.Rule). Required.
	Limiter httplimit.Decider
	// Key derives the actor of a call. Default PeerAddr(0): the
	// client's address, IPv6 by its /64.
	Key Keyer
	// Match selects the calls the rule counts, by full method name
	// ("/pkg.Service/Method"). Default nil: every call.
	Match func(method string) bool
}

// Config configures a Limiter.
type Config struct {
	// Rules are applied in order; a call is refused if any rule denies
	// it. At least one.
	Rules []Rule
	// Failure is what happens to calls while a store fails:
	// sluice.FailOpen lets them through; FailClosed refuses them with
	// UNAVAILABLE. Default FailOpen. FailLocal is refused: give the
	// limiters a store/fallback Store to decide locally.
	Failure sluice.FailurePolicy
	// Logger receives store failures (throttled). Default slog.Default().
	Logger *slog.Logger
}

// A Limiter holds the interceptors of a Config. It is safe for
// concurrent use.
type Limiter struct {
	rules   []rule
	failure sluice.FailurePolicy
	log     *slog.Logger
}

// rule is a Rule with its limits (read once: a Decider returns a copy),
// their item names and its RateLimit-Policy value.
type rule struct {
	Rule
	limits []sluice.Limit
	names  []string
	policy string
}

// New checks c and returns its Limiter.
func New(c Config) (*Limiter, error) {
	if len(c.Rules) == 0 {
		return nil, fmt.Errorf("grpclimit: %w: no rules", sluice.ErrInvalidRequest)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if err := c.Failure.CheckOpenClosed(); err != nil {
		return nil, fmt.Errorf("grpclimit: %w", err)
	}
	l := &Limiter{failure: c.Failure, log: slog.New(logthrottle.New(c.Logger.Handler(), logthrottle.Config{}))}
	for i, r := range c.Rules {
		if r.Limiter == nil {
			return nil, fmt.Errorf("grpclimit: %w: rule %d has no Limiter", sluice.ErrInvalidRequest, i)
		}
		if r.Name == "" {
			r.Name = "default"
			if i > 0 {
				r.Name = "rule" + strconv.Itoa(i+1)
			}
		}
		if r.Key == nil {
			r.Key = PeerAddr(0)
		}
		limits := r.Limiter.Limits()
		if len(limits) == 0 {
			return nil, fmt.Errorf("grpclimit: %w: rule %q: its Limiter has no limits", sluice.ErrInvalidRequest, r.Name)
		}
		names, policy := ratelimitheader.Policy(r.Name, limits)
		l.rules = append(l.rules, rule{Rule: r, limits: limits, names: names, policy: policy})
	}
	return l, nil
}

// Unary returns the interceptor of unary calls.
func (l *Limiter) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, err := l.decide(ctx, info.FullMethod)
		if md != nil {
			_ = grpc.SetHeader(ctx, md)
			if err != nil {
				_ = grpc.SetTrailer(ctx, md)
			}
		}
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream returns the interceptor of streaming calls: a stream counts
// once, when it opens.
func (l *Limiter) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		md, err := l.decide(ss.Context(), info.FullMethod)
		if md != nil {
			_ = ss.SetHeader(md)
			if err != nil {
				ss.SetTrailer(md)
			}
		}
		if err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// decide applies the rules that match method to the call of ctx, and
// returns the metadata that describes the binding decision (nil when no
// rule matched) and the call's refusal, if any.
func (l *Limiter) decide(ctx context.Context, method string) (metadata.MD, error) {
	var (
		bind    sluice.Decision
		name    string
		matched []*rule
	)
	for i := range l.rules {
		r := &l.rules[i]
		if r.Match != nil && !r.Match(method) {
			continue
		}
		key, ok := r.Key(ctx, method)
		if !ok {
			key = UnknownKey
		}
		d, err := r.Limiter.Allow(ctx, key)
		if err != nil {
			if err := l.failed(ctx, r, method, err); err != nil {
				return nil, err
			}
			continue
		}
		matched = append(matched, r)
		if name == "" || d.Binds(bind) {
			bind, name = d, r.itemName(d)
		}
	}
	if len(matched) == 0 {
		return nil, nil
	}
	md := fields(matched, name, bind)
	if bind.Allowed {
		return md, nil
	}
	return md, refusal(name, bind)
}

// failed logs a store failure of rule r, and returns the call's refusal
// when the Limiter fails closed.
func (l *Limiter) failed(ctx context.Context, r *rule, method string, err error) error {
	l.log.WarnContext(ctx, "grpclimit: store failed", "rule", r.Name, "method", method, "err", err)
	if l.failure == sluice.FailClosed {
		return status.Error(codes.Unavailable, "the rate limiter is unavailable; try again shortly")
	}
	return nil
}

// itemName returns the name of the limit that d describes.
func (r *rule) itemName(d sluice.Decision) string {
	for i, l := range r.limits {
		if l == d.Limit {
			return r.names[i]
		}
	}
	return r.names[0]
}

// fields returns the RateLimit fields of the matched rules' policies
// and of the binding decision d, of the limit called name, and, for a
// denial, Retry-After.
func fields(matched []*rule, name string, d sluice.Decision) metadata.MD {
	policies := make([]string, len(matched))
	for i, r := range matched {
		policies[i] = r.policy
	}
	md := metadata.Pairs("ratelimit", string(ratelimitheader.AppendItem(nil, name, d)))
	md.Append("ratelimit-policy", policies...)
	if !d.Allowed {
		md.Set("retry-after", strconv.FormatInt(max(ratelimitheader.CeilSeconds(d.RetryAfter), 1), 10))
	}
	return md
}

// refusal is the status of a call denied by the limit called name.
func refusal(name string, d sluice.Decision) error {
	secs := max(ratelimitheader.CeilSeconds(d.RetryAfter), 1)
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("rate limit %q exceeded; retry after %d s", name, secs))
	if withInfo, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter)}); err == nil {
		st = withInfo
	}
	return st.Err()
}
