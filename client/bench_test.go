package client_test

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/client"
)

// BenchmarkHotKey checks one hot key under "hot" (100/s) as fast as the
// client can, so that most checks are denied, with the denial cache and
// without, over each transport: round-trips/op is what the cache saves,
// admitted/op shows it costs no admissions (both admit about 100 a
// second of the run).
func BenchmarkHotKey(b *testing.B) {
	s := startService(b, nil)
	var run atomic.Int64
	for _, tr := range transports {
		for _, cache := range []struct {
			name string
			size int
		}{{"cache", 0}, {"nocache", -1}} {
			b.Run(tr+"/"+cache.name, func(b *testing.B) {
				c := newClient(b, s, tr, client.Config{CacheSize: cache.size})
				key := "hot-" + strconv.FormatInt(run.Add(1), 10)
				ctx := b.Context()
				admitted := 0
				b.ReportAllocs()
				for b.Loop() {
					d, err := c.Check(ctx, "hot", key)
					if err != nil {
						b.Fatal(err)
					}
					if d.Allowed {
						admitted++
					}
				}
				st := c.Stats()
				b.ReportMetric(float64(st.RoundTrips)/float64(b.N), "round-trips/op")
				b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
				b.ReportMetric(float64(admitted)/b.Elapsed().Seconds(), "admitted/s")
			})
		}
	}
}
