package memory

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestLeaseConformance(t *testing.T) {
	storetest.RunLeases(t, func(t *testing.T) sluice.LeaseStore {
		s := New(Config{})
		t.Cleanup(func() { s.Close() })
		return s
	})
}
