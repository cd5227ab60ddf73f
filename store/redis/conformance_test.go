package redis

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestConformance runs the conformance suite on a real redis-server, on
// both clients, for Decide and for DecideBatch.
func TestConformance(t *testing.T) {
	goRedis := func(t *testing.T) *Store {
		c := goredis.NewClient(&goredis.Options{Addr: sharedServer(t).Addr})
		t.Cleanup(func() { c.Close() })
		return newStore(t, Config{GoRedis: c})
	}
	t.Run("rueidis", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) sluice.Store { return newStore(t, Config{}) })
	})
	t.Run("go-redis", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) sluice.Store { return goRedis(t) })
	})
	t.Run("batch/rueidis", func(t *testing.T) {
		storetest.RunBatch(t, func(t *testing.T) storetest.BatchStore { return newStore(t, Config{}) })
	})
	t.Run("batch/go-redis", func(t *testing.T) {
		storetest.RunBatch(t, func(t *testing.T) storetest.BatchStore { return goRedis(t) })
	})
}
