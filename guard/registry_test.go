package guard_test

import (
	"testing"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/registrytest"
)

func TestMemoryRegistryConformance(t *testing.T) {
	registrytest.Run(t, registrytest.Config{New: func(t *testing.T, l guard.BanLimits, allow *guard.List) guard.Registry {
		r := guard.NewMemoryRegistry(l)
		r.Bans().Spare(allow)
		return r
	}})
}
