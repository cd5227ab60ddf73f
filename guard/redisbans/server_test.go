package redisbans_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testserver"
)

// startRedis starts a redis-server of the test's own (see
// internal/testserver) and returns a client to it; both are stopped when
// the test ends.
func startRedis(t *testing.T) *redis.Client {
	t.Helper()
	s := testserver.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() }) // runs before the server stops
	return c
}

// quiet drops go-redis's own log lines, which TestServerDown would fill
// with failed dials.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	os.Exit(m.Run())
}
