package admin

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/wire"
)

// BenchmarkPage pages 100,000 bans, an attack's worth, in each order.
func BenchmarkPage(b *testing.B) {
	bans := make([]wire.Ban, 100_000)
	for i := range bans {
		since := pageT0.Add(time.Duration(i*7919%100_000) * time.Millisecond)
		bans[i] = wire.Ban{Jail: "abuse", Key: fmt.Sprintf("10.%d.%d.%d", i/62500, i/250%250, 1+i%250), Since: since, Until: since.Add(time.Hour), Refused: int64(i % 97)}
	}
	for _, sort := range []string{SortNewest, SortRefused, SortKey} {
		b.Run(sort, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if p := Page(bans, BanQuery{Sort: sort, Limit: DefaultBanPage}); len(p.Bans) != DefaultBanPage {
					b.Fatal(len(p.Bans))
				}
			}
		})
	}
	b.Run("groups", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Groups(bans, BanQuery{Limit: DefaultBanPage})
		}
	})
}
