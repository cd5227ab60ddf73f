package memory

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// BenchmarkLeaseRef is an acquire and a release by ref on one key.
func BenchmarkLeaseRef(b *testing.B) {
	s := New(Config{})
	defer s.Close()
	r := sluice.LeaseRequest{Prefix: "sluice:default:", Key: "hot-key-1", Limit: 8, TTL: time.Minute}
	b.ReportAllocs()
	for b.Loop() {
		d, ref := s.AcquireRef(r)
		if !d.Allowed {
			b.Fatal("denied")
		}
		s.ReleaseRef(ref)
	}
}
