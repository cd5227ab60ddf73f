package redisbans_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/redisbans"
)

// BenchmarkPropagation measures how long a ban made in one process takes
// to be enforced in another (Put's round trip included): one op is a
// Put, then a spin until the other process matches the ban.
func BenchmarkPropagation(b *testing.B) {
	ctx := context.Background()
	s, _ := startRedis(b)
	p := make([]*redisbans.Registry, 2)
	for i := range p {
		c := newClient(b, s.Addr)
		r, err := redisbans.New(ctx, redisbans.Config{Client: c, Prefix: "prop"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { r.Close() })
		p[i] = r
	}
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		key := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		if _, err := p[0].Put(ctx, ban("j", key, now, time.Hour, 1)); err != nil {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(bound); !matched(p[1], "j", key); runtime.Gosched() {
			if time.Now().After(deadline) {
				b.Fatalf("ban %d not propagated within %v", i, bound)
			}
		}
	}
}

// BenchmarkLoad measures New on a registry of n bans: the time a
// process takes to enforce every ban at start.
func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("bans=%d", n), func(b *testing.B) {
			ctx := context.Background()
			_, c := startRedis(b)
			conf := redisbans.Config{Client: c, Prefix: "load", Limits: guard.BanLimits{Max: 2 * n, MaxKeys: n}} // room for n addresses
			w, err := redisbans.New(ctx, conf)
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			for i := range n {
				if _, err := w.Put(ctx, ban("j", fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), now, time.Hour, 1)); err != nil {
					b.Fatal(err)
				}
			}
			w.Close()
			b.ResetTimer()
			for range b.N {
				r, err := redisbans.New(ctx, conf)
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
