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
