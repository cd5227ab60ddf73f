package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/wire"
)

// TestFailurePolicy asks a service that is down and one that never
// answers, over each transport: the error wraps ErrUnavailable (and
// sluice.ErrStore, and the deadline's error for the silent one), the
// Decision is the failure policy's, and the call ends near its deadline.
func TestFailurePolicy(t *testing.T) {
	const timeout = 200 * time.Millisecond
	tests := []struct {
		name     string
		addr     func(testing.TB) string
		deadline bool
	}{
		{"down", closedAddr, false},
		{"silent", silentAddr, true},
	}
	for _, tt := range tests {
		for _, tr := range transports {
			addr := tt.addr(t)
			for _, policy := range []sluice.FailurePolicy{sluice.FailOpen, sluice.FailClosed} {
				c := failingClient(t, tr, addr, client.Config{Timeout: timeout, Failure: policy})
				start := time.Now()
				d, err := c.Check(t.Context(), "api", "k")
				took := time.Since(start)
				if !errors.Is(err, client.ErrUnavailable) || !errors.Is(err, sluice.ErrStore) || tt.deadline && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%s, %s, policy %v: Check error = %v; want ErrUnavailable, sluice.ErrStore (and the deadline: %v)", tt.name, tr, policy, err, tt.deadline)
				}
				if want := policy == sluice.FailOpen; d.Allowed != want || !want && d.RetryAfter != client.DefaultFailRetryAfter {
					t.Errorf("%s, %s, policy %v: Check = %+v; want allowed %v (retry after %v when not)", tt.name, tr, policy, d, want, client.DefaultFailRetryAfter)
				}
				if took > timeout+10*time.Second { // a hang, not a loaded machine: the error says the deadline ended it
					t.Errorf("%s, %s: Check took %v with a timeout of %v", tt.name, tr, took, timeout)
				}
				if st := c.Stats(); st.Failures != 1 || st.Cached != 0 {
					t.Errorf("%s, %s: Stats() = %+v; want 1 failure, nothing cached", tt.name, tr, st)
				}
			}
		}
	}
}

// TestFailureLocal: the client has no store to decide on: New refuses
// FailLocal, and any value past the policies.
func TestFailureLocal(t *testing.T) {
	for _, p := range []sluice.FailurePolicy{sluice.FailLocal, 9} {
		if _, err := client.New(client.Config{URL: "http://127.0.0.1:1", Failure: p}); !errors.Is(err, sluice.ErrInvalidRequest) {
			t.Errorf("New with policy %v: %v, want ErrInvalidRequest", p, err)
		}
	}
}

// TestFailureContextDeadline checks that the caller's deadline, earlier
// than the client's Timeout, ends a call to a silent service.
func TestFailureContextDeadline(t *testing.T) {
	for _, tr := range transports {
		c := failingClient(t, tr, silentAddr(t), client.Config{Timeout: time.Minute})
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		_, err := c.Check(ctx, "api", "k")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, client.ErrUnavailable) {
			t.Errorf("%s: Check past the context's deadline = %v; want ErrUnavailable and DeadlineExceeded", tr, err)
		}
	}
}

// TestFailureMany checks CheckMany against a service that is down: every
// result carries ErrUnavailable and the policy's Decision, and so does
// the error.
func TestFailureMany(t *testing.T) {
	for _, tr := range transports {
		c := failingClient(t, tr, closedAddr(t), client.Config{Failure: sluice.FailClosed})
		rs, err := c.CheckMany(t.Context(), []wire.CheckRequest{{Rule: "api", Key: "a"}, {Rule: "api", Key: "b"}})
		if !errors.Is(err, client.ErrUnavailable) {
			t.Errorf("%s: CheckMany error = %v, want ErrUnavailable", tr, err)
		}
		for i, r := range rs {
			if !errors.Is(r.Err, client.ErrUnavailable) || r.Decision.Allowed {
				t.Errorf("%s: result %d = %+v; want denied with ErrUnavailable", tr, i, r)
			}
		}
	}
}

// failingClient returns a client of the service at addr (host:port) over
// transport, closed when the test ends.
func failingClient(t *testing.T, transport, addr string, c client.Config) *client.Client {
	t.Helper()
	if transport == "grpc" {
		c.GRPC = addr
	} else {
		c.URL = "http://" + addr
	}
	cl, err := client.New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// TestConnectionReuse checks that a client's checks, sequential or
// concurrent, reuse a few connections rather than dial one each.
func TestConnectionReuse(t *testing.T) {
	s := startService(t, nil)
	conns := s.Conns
	c := newClient(t, s, "http", client.Config{CacheSize: -1})
	for range 50 {
		if _, err := c.Check(t.Context(), "hot", "reuse"); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("50 sequential checks opened %d connections, want 1", n)
	}
	done := make(chan error, 4)
	for range 4 {
		go func() {
			var err error
			for range 50 {
				if _, err = c.Check(t.Context(), "hot", "reuse"); err != nil {
					break
				}
			}
			done <- err
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n > 8 {
		t.Errorf("200 checks on 4 goroutines opened %d connections, want a few (at most 8)", n)
	}
}
