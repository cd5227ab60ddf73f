package redisbans_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/redisbans"
	"github.com/sluicehq/sluice/guard/registrytest"
)

// TestConformance runs the registries' suite on one Redis: the
// registries of one test share a prefix, as a fleet does.
func TestConformance(t *testing.T) {
	s, _ := startRedis(t)
	registrytest.Run(t, registrytest.Config{Shared: true, New: func(t *testing.T, l guard.BanLimits, allow *guard.List) guard.Registry {
		return newRegistry(t, newClient(t, s.Addr), redisbans.Config{Prefix: strings.ReplaceAll(t.Name(), "/another_process", ""), Limits: l, Spare: allow})
	}})
}
