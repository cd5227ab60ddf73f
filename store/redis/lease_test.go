package redis

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestLeaseConformance runs the lease suite on a real redis-server, on
// both clients.
func TestLeaseConformance(t *testing.T) {
	t.Run("rueidis", func(t *testing.T) {
		storetest.RunLeases(t, func(t *testing.T) sluice.LeaseStore { return newStore(t, Config{}) })
	})
	t.Run("go-redis", func(t *testing.T) {
		storetest.RunLeases(t, func(t *testing.T) sluice.LeaseStore {
			c := goredis.NewClient(&goredis.Options{Addr: sharedServer(t).Addr})
			t.Cleanup(func() { c.Close() })
			return newStore(t, Config{GoRedis: c})
		})
	})
}
