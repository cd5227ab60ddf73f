package leaseapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/jsonhttp"
	"github.com/sluicehq/sluice/wire"
)

// maxBody bounds a request body: a rule, a key and an ID.
const maxBody = 16 << 10

// Handler returns the HTTP handler of POST /v1/acquire, /v1/release and
// /v1/extend; leases returns the Leases of the configuration in force.
// Errors are problem details: 400 for a malformed body, an unknown rule
// or class, or a bad ID; 503 when the store failed.
func Handler(leases func() *Leases, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/acquire", post(log, func(w http.ResponseWriter, r *http.Request) (Result, error) {
		var b wire.AcquireRequest
		if err := decode(w, r, &b); err != nil {
			return Result{}, err
		}
		cl, err := sluice.ParseClass(b.Class)
		if err != nil {
			return Result{}, err
		}
		if !(b.Wait >= 0 && b.Wait <= math.MaxInt32) {
			return Result{}, badRequest("wait %v: want seconds, 0 or more", b.Wait)
		}
		return leases().Acquire(r.Context(), AcquireRequest{Rule: b.Rule, Key: b.Key, Class: cl, Wait: time.Duration(b.Wait * float64(time.Second))})
	}))
	mux.Handle("/v1/release", post(log, func(w http.ResponseWriter, r *http.Request) (Result, error) {
		var b wire.LeaseRef
		if err := decode(w, r, &b); err != nil {
			return Result{}, err
		}
		return leases().Release(r.Context(), b.Rule, b.Key, b.ID)
	}))
	mux.Handle("/v1/extend", post(log, func(w http.ResponseWriter, r *http.Request) (Result, error) {
		var b wire.LeaseRef
		if err := decode(w, r, &b); err != nil {
			return Result{}, err
		}
		return leases().Extend(r.Context(), b.Rule, b.Key, b.ID)
	}))
	return mux
}

// A statusError is an error answer the client caused.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &statusError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

func decode(w http.ResponseWriter, r *http.Request, v any) error {
	if status, err := jsonhttp.Decode(w, r, maxBody, v); err != nil {
		return &statusError{status, err.Error()}
	}
	return nil
}

// post adapts a call: POST with a JSON body only, the Result as a
// wire.LeaseResponse, errors as problem details.
func post(log *slog.Logger, call func(w http.ResponseWriter, r *http.Request) (Result, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !jsonhttp.RequirePost(w, r) {
			return
		}
		res, err := call(w, r)
		if err != nil {
			status, msg := errorStatus(err)
			if status == http.StatusServiceUnavailable {
				log.LogAttrs(r.Context(), slog.LevelWarn, "leaseapi: store failed", slog.String("path", r.URL.Path), slog.Any("error", err))
			}
			jsonhttp.Error(w, status, msg)
			return
		}
		jsonhttp.Write(w, http.StatusOK, response(res))
	})
}

// errorStatus returns the status and message of err.
func errorStatus(err error) (int, string) {
	var se *statusError
	switch {
	case errors.As(err, &se):
		return se.status, se.msg
	case errors.Is(err, ErrUnknownRule), errors.Is(err, sluice.ErrInvalidRequest):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "request cancelled"
	}
	return http.StatusServiceUnavailable, "the store failed; try again"
}

func response(res Result) wire.LeaseResponse {
	out := wire.LeaseResponse{OK: res.OK, Rule: res.Rule, ID: res.ID, InUse: res.InUse, Limit: res.Limit,
		RetryAfter: math.Ceil(float64(res.RetryAfter)/float64(time.Millisecond)) / 1000}
	if res.Guard != guard.Pass {
		out.Guard = res.Guard.String()
	}
	if !res.Expires.IsZero() {
		e := res.Expires.UTC()
		out.Expires = &e
	}
	return out
}
