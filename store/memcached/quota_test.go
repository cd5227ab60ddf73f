package memcached

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestQuotaConformance runs the quota suite on a real memcached.
func TestQuotaConformance(t *testing.T) {
	srv := testserver.StartMemcached(t)
	storetest.RunQuotas(t, func(t *testing.T) sluice.QuotaStore { return newStore(t, Config{Addrs: []string{srv.Addr}}) })
}
