package redisbans_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/guard/redisbans"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// startRedis starts a redis-server of the test's own (see
// internal/testing/testserver) and returns it with a client; both are stopped
// when the test ends.
func startRedis(t testing.TB) (*testserver.Redis, rueidis.Client) {
	t.Helper()
	s := testserver.StartRedis(t)
	return s, newClient(t, s.Addr)
}

// newClient returns a client of the Redis at addr, a process's own,
// closed when the test ends (before the server stops).
func newClient(t testing.TB, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis.NewClient(%s): %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// newRegistry returns a Registry on c, closed when the test ends.
func newRegistry(t *testing.T, c rueidis.Client, conf redisbans.Config) *redisbans.Registry {
	t.Helper()
	conf.Client = c
	r, err := redisbans.New(context.Background(), conf)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// eventually polls cond until it holds or d has passed, and reports how
// long it took and whether it held.
func eventually(d time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for {
		if cond() {
			return time.Since(start), true
		}
		if time.Since(start) > d {
			return time.Since(start), false
		}
		time.Sleep(time.Millisecond) // a poll with a deadline, not a wait for a guess
	}
}

// do runs one command on c and fails the test if it fails.
func do(t *testing.T, c rueidis.Client, args ...string) rueidis.RedisResult {
	t.Helper()
	res := c.Do(context.Background(), c.B().Arbitrary(args...).Build())
	if err := res.Error(); err != nil && !rueidis.IsRedisNil(err) {
		t.Fatalf("%v: %v", args, err)
	}
	return res
}
