package client_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/testing/testclock"
	"github.com/sluicehq/sluice/wire"
)

// TestCheck takes a key to its limit over each transport: the denial
// says when to retry, is answered from the cache until then (checks of
// the same or a larger cost, and peeks) without a round trip, and the
// key passes again once it may.
func TestCheck(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			clk := testclock.New(t0)
			c := newClient(t, startService(t, clk), tr, client.Config{})
			ctx := t.Context()
			if d, err := c.Peek(ctx, "api", "k"); err != nil || !d.Allowed || d.Remaining != 2 {
				t.Fatalf("Peek(api, k) = %+v, %v; want allowed, 2 remaining", d, err)
			}
			for _, want := range []int{2, 1, 0} {
				if d, err := c.Check(ctx, "api", "k"); err != nil || !d.Allowed || d.Remaining != want {
					t.Fatalf("Check(api, k) = %+v, %v; want allowed, %d remaining", d, err, want)
				}
			}
			d, err := c.Check(ctx, "api", "k")
			if err != nil || d.Allowed || d.RetryAfter != 20*time.Second || d.Limit.Rate != 3 || d.Limit.Period != time.Minute {
				t.Fatalf("Check(api, k) over the limit = %+v, %v; want denied, retry after 20s, limit 3/min", d, err)
			}
			before := c.Stats()
			clk.Advance(18 * time.Second)
			for name, check := range map[string]func() (sluice.Decision, error){
				"Check":  func() (sluice.Decision, error) { return c.Check(ctx, "api", "k") },
				"CheckN": func() (sluice.Decision, error) { return c.CheckN(ctx, "api", "k", 2) },
				"Peek":   func() (sluice.Decision, error) { return c.Peek(ctx, "api", "k") },
			} {
				if d, err := check(); err != nil || d.Allowed || d.RetryAfter != 2*time.Second {
					t.Errorf("%s(api, k) cached = %+v, %v; want denied, retry after 2s", name, d, err)
				}
			}
			if got := c.Stats(); got.RoundTrips != before.RoundTrips || got.CacheHits != before.CacheHits+3 || got.Cached != 1 {
				t.Errorf("Stats() = %+v after 3 cached denials, was %+v: want no round trip, 3 more hits, 1 cached", got, before)
			}
			clk.Advance(2 * time.Second)
			if d, err := c.Check(ctx, "api", "k"); err != nil || !d.Allowed {
				t.Errorf("Check(api, k) after retry_after = %+v, %v; want allowed", d, err)
			}
			if got := c.Stats(); got.RoundTrips != before.RoundTrips+1 {
				t.Errorf("Stats().RoundTrips = %d after the denial expired, want %d", got.RoundTrips, before.RoundTrips+1)
			}
		})
	}
}

// TestRetryAfterEveryTransport checks that a denial carries the same
// wait over gRPC as over HTTP, to the millisecond, from a service run
// with its defaults (no -grpc-headers), and that the denial cache keeps
// it as long on both.
func TestRetryAfterEveryTransport(t *testing.T) {
	waits := map[string]time.Duration{}
	for _, tr := range transports {
		clk := testclock.New(t0)
		c := newClient(t, startService(t, clk), tr, client.Config{})
		ctx := t.Context()
		for range 3 {
			if d, err := c.Check(ctx, "api", "k"); err != nil || !d.Allowed {
				t.Fatalf("%s: Check(api, k) = %+v, %v; want allowed", tr, d, err)
			}
		}
		clk.Advance(10 * time.Millisecond)
		d, err := c.Check(ctx, "api", "k")
		if err != nil || d.Allowed || d.RetryAfter != 19990*time.Millisecond {
			t.Errorf("%s: Check(api, k) over 3/min, 10ms after = %+v, %v; want denied, retry after 19.99s", tr, d, err)
		}
		waits[tr] = d.RetryAfter
		clk.Advance(19980 * time.Millisecond)
		before := c.Stats()
		if d, err := c.Check(ctx, "api", "k"); err != nil || d.Allowed || d.RetryAfter != 10*time.Millisecond || c.Stats().CacheHits != before.CacheHits+1 {
			t.Errorf("%s: Check(api, k) 10ms before the wait ends = %+v, %v, %+v; want denied by the cache, retry after 10ms", tr, d, err, c.Stats())
		}
	}
	if waits["http"] != waits["grpc"] {
		t.Errorf("waits %v, want the same over both transports", waits)
	}
}

// TestCheckUncached checks the denials the cache must not hold: one
// without a wait (the deny list), and any with the cache off.
func TestCheckUncached(t *testing.T) {
	s := startService(t, testclock.New(t0))
	for _, tt := range []struct {
		name, rule, key string
		size            int
	}{
		{"deny list", "api", "blocked", 0},
		{"cache off", "once", "k", -1},
	} {
		for _, tr := range transports {
			c := newClient(t, s, tr, client.Config{CacheSize: tt.size})
			c.Check(t.Context(), tt.rule, tt.key)
			for range 2 {
				if d, err := c.Check(t.Context(), tt.rule, tt.key); err != nil || d.Allowed {
					t.Fatalf("%s, %s: Check(%s, %s) = %+v, %v; want denied", tt.name, tr, tt.rule, tt.key, d, err)
				}
			}
			if st := c.Stats(); st.RoundTrips != 3 || st.CacheHits != 0 {
				t.Errorf("%s, %s: Stats() = %+v; want 3 round trips, no hit", tt.name, tr, st)
			}
		}
	}
}

// TestCheckErrors checks the requests the service or the client refuse:
// errors wrapping sluice.ErrInvalidRequest, never ErrUnavailable, and a
// denying Decision whatever the failure policy.
func TestCheckErrors(t *testing.T) {
	s := startService(t, nil)
	tests := []struct {
		name, rule, key string
		cost            int
		transports      []string
	}{
		{"unknown rule", "nope", "k", 1, transports},
		{"no key", "api", "", 1, transports},
		{"no rule", "", "k", 1, transports},
		{"cost above the burst", "api", "k", 4, []string{"http"}},
		{"cost below 1", "api", "k", 0, transports},
	}
	for _, tt := range tests {
		for _, tr := range tt.transports {
			c := newClient(t, s, tr, client.Config{Failure: sluice.FailOpen})
			d, err := c.CheckN(t.Context(), tt.rule, tt.key, tt.cost)
			if !errors.Is(err, sluice.ErrInvalidRequest) || errors.Is(err, client.ErrUnavailable) || d.Allowed {
				t.Errorf("%s, %s: CheckN(%q, %q, %d) = %+v, %v; want a denial and sluice.ErrInvalidRequest", tt.name, tr, tt.rule, tt.key, tt.cost, d, err)
			}
		}
	}
	c := newClient(t, s, "http", client.Config{})
	if _, err := c.CheckMany(t.Context(), []wire.CheckRequest{{Domain: "edge", Descriptors: []wire.Descriptor{}}}); err != nil {
		t.Errorf("CheckMany(a descriptor check) error = %v, want it in the Result only", err)
	}
}

// TestReset forgets a denied key, in the service and in the cache; a
// client without the HTTP API cannot reset.
func TestReset(t *testing.T) {
	s := startService(t, testclock.New(t0))
	ctx := t.Context()
	for _, tr := range transports {
		c := newClient(t, s, tr, client.Config{})
		key := "reset-" + tr
		c.Check(ctx, "once", key)
		if d, _ := c.Check(ctx, "once", key); d.Allowed {
			t.Fatalf("%s: second Check(once, %s) allowed, want denied", tr, key)
		}
		if err := c.Reset(ctx, "once", key); err != nil {
			t.Fatalf("%s: Reset(once, %s) = %v", tr, key, err)
		}
		if d, err := c.Check(ctx, "once", key); err != nil || !d.Allowed {
			t.Errorf("%s: Check(once, %s) after Reset = %+v, %v; want allowed", tr, key, d, err)
		}
		if err := c.Reset(ctx, "nope", key); !errors.Is(err, sluice.ErrInvalidRequest) {
			t.Errorf("%s: Reset(nope, %s) = %v, want sluice.ErrInvalidRequest", tr, key, err)
		}
	}
	c, err := client.New(client.Config{GRPC: s.GRPC})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Reset(ctx, "once", "k"); !errors.Is(err, client.ErrUnsupported) {
		t.Errorf("Reset without URL = %v, want ErrUnsupported", err)
	}
}

// TestCacheFlood denies many distinct keys through a real service: the
// client's cache holds no more than its cap.
func TestCacheFlood(t *testing.T) {
	const size = 16
	s := startService(t, testclock.New(t0))
	c := newClient(t, s, "http", client.Config{CacheSize: size})
	checks := make([]wire.CheckRequest, 0, 400)
	for i := range 200 {
		key := "flood-" + strconv.Itoa(i)
		checks = append(checks, wire.CheckRequest{Rule: "once", Key: key}, wire.CheckRequest{Rule: "once", Key: key})
	}
	rs, err := c.CheckMany(t.Context(), checks)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Err != nil || r.Decision.Allowed != (i%2 == 0) {
			t.Fatalf("result %d = %+v; want the first check of each key allowed, the second denied", i, r)
		}
	}
	if st := c.Stats(); st.Cached != size || st.RoundTrips != 4 {
		t.Errorf("Stats() = %+v after 200 denied keys; want %d cached (the cap), 4 round trips (batches of %d)", st, size, wire.MaxBatch)
	}
}

// TestCheckMany decides a batch over each transport: each check on its
// own, in order, refused checks in their result, cached denials without
// a round trip.
func TestCheckMany(t *testing.T) {
	s := startService(t, testclock.New(t0))
	for _, tr := range transports {
		c := newClient(t, s, tr, client.Config{})
		k := "many-" + tr
		checks := []wire.CheckRequest{
			{Rule: "login", Key: k},
			{Rule: "login", Key: k, Peek: true},
			{Rule: "nope", Key: k},
			{Rule: "login", Key: k},
			{Rule: "login", Key: k},
			{Rule: "login", Key: k},
		}
		rs, err := c.CheckMany(t.Context(), checks)
		if err != nil || len(rs) != len(checks) {
			t.Fatalf("%s: CheckMany = %d results, %v; want %d, nil", tr, len(rs), err, len(checks))
		}
		want := []bool{true, true, false, true, false, false}
		for i, r := range rs {
			if r.Decision.Allowed != want[i] || (r.Err != nil) != (i == 2) {
				t.Errorf("%s: result %d = %+v; want allowed %v, an error only for the unknown rule", tr, i, r, want[i])
			}
		}
		if i := 2; !errors.Is(rs[i].Err, sluice.ErrInvalidRequest) {
			t.Errorf("%s: result %d error = %v, want sluice.ErrInvalidRequest", tr, i, rs[i].Err)
		}
		before := c.Stats()
		rs, _ = c.CheckMany(t.Context(), checks[3:])
		if st := c.Stats(); st.RoundTrips != before.RoundTrips || rs[0].Decision.Allowed {
			t.Errorf("%s: CheckMany of cached denials = %+v, %d round trips; want denied, none", tr, rs, st.RoundTrips-before.RoundTrips)
		}
	}
}
