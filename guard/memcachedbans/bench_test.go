package memcachedbans_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/memcachedbans"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// BenchmarkPropagation measures how long a ban made in one process takes
// to be enforced in another that polls every second (the default): one
// op is a Put, then a spin until the other process matches the ban.
func BenchmarkPropagation(b *testing.B) {
	ctx := context.Background()
	s := testserver.StartMemcached(b)
	conf := memcachedbans.Config{Addrs: []string{s.Addr}, Prefix: "prop", PollEvery: memcachedbans.DefaultPollEvery}
	p := fleet(b, 2, conf)
	now := time.Now()
	b.ResetTimer()
	for i := range b.N {
		key := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		if _, err := p[0].Put(ctx, ban(key, now, time.Hour)); err != nil {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(bound); !matched(p[1], key); runtime.Gosched() {
			if time.Now().After(deadline) {
				b.Fatalf("ban %d not propagated within %v", i, bound)
			}
		}
	}
}

// BenchmarkLoad measures New on a registry of n bans: the time a process
// takes to enforce every ban at start.
func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("bans=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s := testserver.StartMemcached(b, "-m", "256")
			conf := memcachedbans.Config{Addrs: []string{s.Addr}, Prefix: "load", Limits: guard.BanLimits{Max: 2 * n, MaxKeys: n}, PollEvery: time.Hour} // room for n addresses
			w := newRegistry(b, conf)
			now := time.Now()
			for i := range n {
				if _, err := w.Put(ctx, ban(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), now, time.Hour)); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				r, err := memcachedbans.New(ctx, conf)
				if err != nil {
					b.Fatal(err)
				}
				if got := r.Bans().Stats().Bans; got != n {
					b.Fatalf("loaded %d bans, want %d", got, n)
				}
				r.Close()
			}
		})
	}
}
