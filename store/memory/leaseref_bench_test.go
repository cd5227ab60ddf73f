package memory

import (
	"testing"
	"time"
)

// BenchmarkLeaseRef is an acquire and a release by ref on one key.
func BenchmarkLeaseRef(b *testing.B) {
	s := New(Config{})
	defer s.Close()
	b.ReportAllocs()
	for b.Loop() {
		ref, g := s.AcquireRef("sluice:default:", "hot-key-1", 8, 0, time.Minute)
		if !g.Allowed() {
			b.Fatal("denied")
		}
		s.ReleaseRef(ref)
	}
}

// BenchmarkLeaseRefDenied is a flood of acquires refused on a key whose
// MaxLeases/16 places are all held: each costs O(1), not a scan of the
// places for the Retry-After.
func BenchmarkLeaseRefDenied(b *testing.B) {
	s := New(Config{})
	defer s.Close()
	const limit = 1 << 12
	for range limit {
		if _, g := s.AcquireRef("sluice:default:", "full", limit, 0, time.Hour); !g.Allowed() {
			b.Fatal("refused while filling")
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, g := s.AcquireRef("sluice:default:", "full", limit, 0, time.Hour); g.Allowed() || g.Until == 0 {
			b.Fatalf("AcquireRef on a full key = %+v, want refused with its earliest expiry", g)
		}
	}
}
