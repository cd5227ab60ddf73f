package rules

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/testing/cputime"
	"github.com/sluicehq/sluice/store/memory"
)

// benchRules are a named rule and a domain of one descriptor, as the
// sample configuration and Envoy's examples have them.
const benchRules = `rules:
  - name: api
    limits: ["1000/min"]
  - domain: edge
    descriptors:
      - key: remote_address
        rate_limit: {unit: minute, requests_per_unit: 1000}
`

// BenchmarkCheck is the engine's cost per check of each kind, on the
// memory store, over 10,000 actors, with a guard whose lists pass them
// (kind=named, kind=domain), beside its floor: the memory store's
// decision of the same request alone (kind=floor). CPU per check is the
// process's (cpu-ns/op), steadier than ns/op on a shared machine.
func BenchmarkCheck(b *testing.B) {
	c, err := config.Parse("bench.yaml", []byte(benchRules))
	if err != nil {
		b.Fatal(err)
	}
	store := memory.New(memory.Config{})
	b.Cleanup(func() { store.Close() })
	var allow, deny guard.List
	allow.Add(guard.NetEntry(netip.MustParsePrefix("192.0.2.0/24")))
	deny.Add(guard.NetEntry(netip.MustParsePrefix("198.51.100.0/24")))
	g := guard.NewGuard(guard.GuardConfig{Allow: &allow, Deny: &deny})
	e, err := New(Config{Store: store, Rules: c.Rules, Domains: c.Domains, Guard: g})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.0.%d.%d", i/256, i%256)
	}
	var res Result // reused by CheckInto
	kinds := []struct {
		name string
		do   func(ctx context.Context, key string) error
	}{
		{"named", func(ctx context.Context, key string) error {
			_, err := e.Check(ctx, Named("api", key))
			return err
		}},
		{"named-into", func(ctx context.Context, key string) error {
			d := [1]Descriptor{Key(key)}
			return e.CheckInto(ctx, Request{Domain: "api", Descriptors: d[:]}, &res)
		}},
		{"domain", func(ctx context.Context, key string) error {
			_, err := e.Check(ctx, Request{Domain: "edge", Descriptors: []Descriptor{{Entries: []Entry{{Key: "remote_address", Value: key}}}}})
			return err
		}},
		{"floor", func(ctx context.Context, key string) error {
			_, err := store.Decide(ctx, sluice.Request{Prefix: "sluice:api:", Key: key, Limits: e.Rule("api").Limits, Cost: 1})
			return err
		}},
	}
	ctx := context.Background()
	for _, k := range kinds {
		b.Run("kind="+k.name, func(b *testing.B) {
			cputime.Loop(b, len(keys), func(i int) error { return k.do(ctx, keys[i]) })
		})
	}
}
