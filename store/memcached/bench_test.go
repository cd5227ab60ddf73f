package memcached

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// BenchmarkDecide measures one goroutine's decisions on one key, all
// admitted or all denied, per algorithm; the comparison with peers lives
// in the bench module.
func BenchmarkDecide(b *testing.B) {
	srv := testserver.StartMemcached(b)
	for _, alg := range []sluice.Algorithm{sluice.FixedWindow, sluice.SlidingWindow, sluice.GCRA, sluice.SlidingLog} {
		for _, traffic := range []string{"admit", "deny"} {
			b.Run(alg.String()+"/"+traffic, func(b *testing.B) {
				s := newStore(b, Config{Addrs: []string{srv.Addr}})
				l := sluice.Limit{Rate: 1, Period: time.Hour, Algorithm: alg}
				if traffic == "admit" {
					l = sluice.Limit{Rate: 1_000_000_000, Period: time.Hour, Algorithm: alg}
					if alg == sluice.SlidingLog { // a log keeps a timestamp per unit
						l = sluice.Limit{Rate: 1000, Period: time.Millisecond, Algorithm: alg}
					}
				}
				r := sluice.Request{Prefix: uniquePrefix(b), Key: "k", Limits: []sluice.Limit{l}, Cost: 1}
				ctx := context.Background()
				if traffic == "deny" {
					s.Decide(ctx, r)
				}
				st0 := s.Stats()
				b.ReportAllocs()
				b.ResetTimer()
				admitted := 0
				for range b.N {
					d, err := s.Decide(ctx, r)
					if err != nil {
						b.Fatal(err)
					}
					if d.Allowed {
						admitted++
					}
				}
				st := s.Stats()
				b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
				b.ReportMetric(float64(st.RoundTrips-st0.RoundTrips)/float64(b.N), "round-trips/op")
			})
		}
	}
}
