package leaseapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/server/leaseapi"
	"github.com/sluicehq/sluice/store/memory"
)

// idStore is a LeaseStore and nothing more: it hides store/memory's
// LeaseRefs, so that every acquire draws its lease's ID, as one on Redis
// or memcached does.
type idStore struct{ sluice.LeaseStore }

// BenchmarkLeases is the service's lease call: an acquire handed over by
// ID, and its release by ID, on one key of a rule of 8. On store/memory
// the ID is drawn when the lease is handed over; on idStore, before the
// store is asked.
func BenchmarkLeases(b *testing.B) {
	for _, tt := range []struct {
		name  string
		store func(*memory.Store) sluice.LeaseStore
	}{
		{"store=memory", func(s *memory.Store) sluice.LeaseStore { return s }},
		{"store=ids", func(s *memory.Store) sluice.LeaseStore { return idStore{s} }},
	} {
		b.Run(tt.name, func(b *testing.B) {
			ms := memory.New(memory.Config{})
			defer ms.Close()
			l, err := leaseapi.New(leaseapi.Config{Store: tt.store(ms),
				Rules: []config.ConcurrencyRule{{Name: "reports", Limit: 8, TTL: time.Minute}}})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				res, err := l.Acquire(ctx, leaseapi.AcquireRequest{Rule: "reports", Key: "tenant-1"})
				if err != nil || !res.OK {
					b.Fatalf("Acquire = %+v, %v", res, err)
				}
				if res, err = l.Release(ctx, "reports", "tenant-1", res.ID); err != nil || !res.OK {
					b.Fatalf("Release = %+v, %v", res, err)
				}
			}
		})
	}
}
