package redis

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestQuotaConformance runs the quota suite, which plays quota.lua
// against algorithm.QuotaTable, on a real redis-server, on both clients.
func TestQuotaConformance(t *testing.T) {
	t.Run("rueidis", func(t *testing.T) {
		storetest.RunQuotas(t, func(t *testing.T) sluice.QuotaStore { return newStore(t, Config{}) })
	})
	t.Run("go-redis", func(t *testing.T) {
		storetest.RunQuotas(t, func(t *testing.T) sluice.QuotaStore {
			c := goredis.NewClient(&goredis.Options{Addr: sharedServer(t).Addr})
			t.Cleanup(func() { c.Close() })
			return newStore(t, Config{GoRedis: c})
		})
	})
}
