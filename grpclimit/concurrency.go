package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/logthrottle"
	"github.com/sluicehq/sluice/internal/ratelimitheader"
)

// ConcurrencyConfig configures a Concurrency. The zero value of every
// field but Limiter means its default.
type ConcurrencyConfig struct {
	// Limiter holds the limit per key, the leases' store, the classes'
	// shares and the adaptive limit. Required.
	Limiter *sluice.Concurrency
	// Key derives the key whose calls in flight are limited. Default
	// nil: one key for every call, "all"; FullMethod limits each method
	// apart, PeerAddr each client.
	Key Keyer
	// Class gives a call's priority class. Default nil: ClassDefault for
	// every call. ClassFromMetadata reads it from the call's metadata:
	// use it only when a proxy you run sets it.
	Class func(ctx context.Context, method string) sluice.Class
	// Wait is how long a call may wait for a place (first in first out
	// among this process's waiters of its key and class) before it is
	// refused. Default 0: refused at once.
	Wait time.Duration
	// Dropped reports the handler errors that tell the adaptive limit a
	// call failed from overload. Default: UNAVAILABLE, DEADLINE_EXCEEDED
	// and RESOURCE_EXHAUSTED.
	Dropped func(error) bool
	// Failure is what happens to calls while the store fails, as in
	// Config: sluice.FailOpen (the default) or FailClosed.
	Failure sluice.FailurePolicy
	// Logger receives store failures (throttled). Default slog.Default().
	Logger *slog.Logger
}

// A Concurrency holds the interceptors that limit how many calls per key
// are in flight: a unary call holds a lease of the Limiter while its
// handler runs, a stream for as long as it is open (the lease kept alive
// while it outlives half its TTL). A call refused by the limit per key
// gets RESOURCE_EXHAUSTED with a RetryInfo detail and "retry-after" in
// its trailers; one shed by the adaptive limit gets UNAVAILABLE. It is
// safe for concurrent use.
type Concurrency struct {
	c   ConcurrencyConfig
	log *slog.Logger
}

// NewConcurrency checks c and returns its interceptors.
func NewConcurrency(c ConcurrencyConfig) (*Concurrency, error) {
	if c.Limiter == nil {
		return nil, fmt.Errorf("grpclimit: %w: no concurrency limiter", sluice.ErrInvalidRequest)
	}
	if err := c.Failure.CheckOpenClosed(); err != nil {
		return nil, fmt.Errorf("grpclimit: %w", err)
	}
	if c.Key == nil {
		c.Key = func(context.Context, string) (string, bool) { return "all", true }
	}
	if c.Class == nil {
		c.Class = func(context.Context, string) sluice.Class { return sluice.ClassDefault }
	}
	if c.Dropped == nil {
		c.Dropped = func(err error) bool {
			switch status.Code(err) {
			case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted:
				return true
			}
			return false
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return &Concurrency{c: c, log: slog.New(logthrottle.New(c.Logger.Handler(), logthrottle.Config{}))}, nil
}

// ClassFromMetadata returns a Class function that reads the class from
// the first value of the request metadata name ("critical", "default",
// "sheddable"), ClassDefault when absent or unknown.
func ClassFromMetadata(name string) func(context.Context, string) sluice.Class {
	return func(ctx context.Context, _ string) sluice.Class {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get(name); len(v) > 0 {
			if c, err := sluice.ParseClass(v[0]); err == nil {
				return c
			}
		}
		return sluice.ClassDefault
	}
}

// Unary returns the interceptor of unary calls.
func (c *Concurrency) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		l, err := c.admit(ctx, info.FullMethod)
		if l == nil {
			if err != nil {
				return nil, err
			}
			return handler(ctx, req)
		}
		resp, err := handler(ctx, req)
		c.release(ctx, l, info.FullMethod, err)
		return resp, err
	}
}

// Stream returns the interceptor of streaming calls: a stream holds its
// place until it ends.
func (c *Concurrency) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		l, err := c.admit(ctx, info.FullMethod)
		if l == nil {
			if err != nil {
				return err
			}
			return handler(srv, ss)
		}
		stop := l.KeepAlive(context.WithoutCancel(ctx))
		err = handler(srv, ss)
		stop()
		c.release(ctx, l, info.FullMethod, err)
		return err
	}
}

// admit acquires a lease for a call of method. It returns the lease to
// release, or nil and the call's refusal, or nil and nil for a call that
// goes through unlimited (no key, or a store failure when failing open).
func (c *Concurrency) admit(ctx context.Context, method string) (*sluice.Lease, error) {
	key, ok := c.c.Key(ctx, method)
	if !ok {
		return nil, nil
	}
	cl := c.c.Class(ctx, method)
	var l *sluice.Lease
	var err error
	if c.c.Wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, c.c.Wait)
		l, err = c.c.Limiter.Wait(wctx, key, cl)
		cancel()
	} else {
		l, err = c.c.Limiter.Acquire(ctx, key, cl)
	}
	switch {
	case err != nil && !errors.Is(err, context.DeadlineExceeded):
		c.log.WarnContext(ctx, "grpclimit: concurrency store failed", "method", method, "err", err)
		if c.c.Failure == sluice.FailClosed {
			return nil, status.Error(codes.Unavailable, "the concurrency limiter is unavailable; try again shortly")
		}
		return nil, nil
	case err != nil || !l.Allowed:
		return nil, c.refusal(ctx, l)
	}
	return l, nil
}

// refusal is the status of a call refused by l (nil: its wait ended),
// with retry-after in the trailers.
func (c *Concurrency) refusal(ctx context.Context, l *sluice.Lease) error {
	retry := time.Second
	if l != nil && l.RetryAfter > 0 {
		retry = l.RetryAfter
	}
	secs := max(ratelimitheader.CeilSeconds(retry), 1)
	_ = grpc.SetTrailer(ctx, metadata.Pairs("retry-after", strconv.FormatInt(secs, 10)))
	if l != nil && l.Adaptive {
		return status.Error(codes.Unavailable, "the server is shedding load; retry later")
	}
	msg := "too many calls in flight"
	if l != nil {
		msg = fmt.Sprintf("%d of %d calls in flight", l.InUse, l.Limit)
	}
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("%s; retry after %d s", msg, secs))
	if withInfo, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)}); err == nil {
		st = withInfo
	}
	return st.Err()
}

// release ends l after a call that returned err.
func (c *Concurrency) release(ctx context.Context, l *sluice.Lease, method string, err error) {
	if err != nil && c.c.Dropped(err) {
		l.Drop()
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := l.Release(rctx); err != nil {
		c.log.WarnContext(ctx, "grpclimit: concurrency store failed", "method", method, "err", err)
	}
}
