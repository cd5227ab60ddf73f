package meta

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// BenchmarkDo measures one round trip of a batch of n commands, to show
// what pipelining more commands in a round trip costs.
func BenchmarkDo(b *testing.B) {
	c := New(Config{Addr: testserver.StartMemcached(b).Addr})
	defer c.Close()
	ctx := context.Background()
	for _, n := range []int{1, 2, 4, 6, 8, 10, 16} {
		b.Run("commands="+strconv.Itoa(n), func(b *testing.B) {
			var batch Batch
			b.ReportAllocs()
			for range b.N {
				batch.Reset()
				batch.IncrCreate("bench:ctr", 1, time.Minute)
				for i := 1; i < n; i++ {
					batch.Get("bench:k" + strconv.Itoa(i))
				}
				if err := c.Do(ctx, &batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("send+do", func(b *testing.B) {
		var batch Batch
		b.ReportAllocs()
		for range b.N {
			batch.Reset()
			batch.Decr("bench:ctr", 1)
			if err := c.Send(ctx, &batch); err != nil {
				b.Fatal(err)
			}
			batch.Reset()
			batch.IncrCreate("bench:ctr", 1, time.Minute)
			if err := c.Do(ctx, &batch); err != nil {
				b.Fatal(err)
			}
		}
	})
}
