package guard_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/sluicehq/sluice/guard"
)

// BenchmarkListContains asks a list of n networks about an address it
// does not hold, as every request's check of the allow and deny lists
// does: with a few networks (tried one by one) and with many (looked up
// at each of their lengths).
func BenchmarkListContains(b *testing.B) {
	for _, n := range []int{1, 4, 8, 9, 64} {
		b.Run(fmt.Sprintf("networks=%d", n), func(b *testing.B) {
			var l guard.List
			for i := range n {
				fill(b, &l, fmt.Sprintf("10.%d.%d.0/%d", i/256, i%256, 24-i%3))
			}
			a := netip.MustParseAddr("203.0.113.9")
			for b.Loop() {
				if l.Contains(a) {
					b.Fatal("held")
				}
			}
		})
	}
}
