package memcachedbans_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/memcachedbans"
	"github.com/sluicehq/sluice/guard/registrytest"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// TestConformance runs the registries' suite on one memcached: the
// registries of one test share a prefix, as a fleet does.
func TestConformance(t *testing.T) {
	s := testserver.StartMemcached(t)
	registrytest.Run(t, registrytest.Config{Shared: true, New: func(t *testing.T, l guard.BanLimits, allow *guard.List) guard.Registry {
		sum := sha256.Sum256([]byte(strings.ReplaceAll(t.Name(), "/another_process", "")))
		return newRegistry(t, memcachedbans.Config{Addrs: []string{s.Addr}, Prefix: hex.EncodeToString(sum[:8]), Limits: l, Spare: allow})
	}})
}
