package rules

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/store/memory"
)

// overrideDomain is a domain whose descriptors Envoy may send with a
// limit override.
const overrideDomain = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
`

// overridden returns a descriptor of the edge domain for address a, with
// limit l as its override.
func overridden(a string, l sluice.Limit) Descriptor {
	d := desc("remote_address=" + a)
	d.Override = &l
	return d
}

// TestOverride decides descriptors under the limits their overrides set:
// each override counts apart from the configured limit and from other
// overrides, and an invalid override is an error.
func TestOverride(t *testing.T) {
	e, _, _ := newEngine(t, overrideDomain)
	two, three := sluice.Limit{Rate: 2, Period: time.Hour}, sluice.Limit{Rate: 3, Period: time.Hour}
	tests := []struct {
		name string
		d    Descriptor
		n    int
		want int
	}{
		{"the configured limit", desc("remote_address=198.51.100.1"), 12, 10},
		{"an override of 2/h", overridden("198.51.100.1", two), 4, 2},
		{"the same override again, counted on", overridden("198.51.100.1", two), 1, 0},
		{"another address", overridden("198.51.100.2", two), 3, 2},
		{"an override of 3/h", overridden("198.51.100.3", three), 4, 3},
	}
	for _, tt := range tests {
		if got := admitted(t, e, "edge", tt.n, tt.d); got != tt.want {
			t.Errorf("%s: admitted %d of %d, want %d", tt.name, got, tt.n, tt.want)
		}
	}
	res, err := e.Check(context.Background(), Request{Domain: "edge", Descriptors: []Descriptor{overridden("198.51.100.1", three)}})
	if err != nil || res.Statuses[0].Rule.ID != "edge.override" || res.Statuses[0].Decision.Limit != three {
		t.Errorf("Check(3/h override) = rule %v, limit %v, %v; want edge.override, %v", res.Statuses[0].Rule, res.Statuses[0].Decision.Limit, err, three)
	}
	if _, err := e.Check(context.Background(), Request{Domain: "edge", Descriptors: []Descriptor{overridden("198.51.100.1", sluice.Limit{Rate: -1, Period: time.Second})}}); err == nil {
		t.Error("Check(override of rate -1) = nil error, want an error")
	}
}

// TestOverrideMany sends more distinct overrides than the engine keeps
// rules for: each still decides under its own limit.
func TestOverrideMany(t *testing.T) {
	e, _, _ := newEngine(t, overrideDomain)
	for rate := 1; rate <= 3*maxOverrides; rate += 7 {
		a := fmt.Sprintf("198.51.100.%d", rate%250)
		if got := admitted(t, e, "edge", rate+1, overridden(a, sluice.Limit{Rate: rate, Period: time.Hour})); got != rate {
			t.Errorf("override of %d/h: admitted %d of %d, want %d", rate, got, rate+1, rate)
		}
	}
}

// BenchmarkOverride decides descriptors with a limit override over 10k
// addresses, beside the same descriptors under the configured limit.
func BenchmarkOverride(b *testing.B) {
	c, err := config.Parse("bench.yaml", []byte(overrideDomain))
	if err != nil {
		b.Fatal(err)
	}
	st := memory.New(memory.Config{SweepInterval: -1})
	defer st.Close()
	e, err := New(Config{Store: st, Domains: c.Domains})
	if err != nil {
		b.Fatal(err)
	}
	const keys = 10_000
	limit := sluice.Limit{Rate: 100, Period: time.Minute}
	plain, over := make([][]Descriptor, keys), make([][]Descriptor, keys)
	for i := range keys {
		a := fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)
		plain[i], over[i] = []Descriptor{desc("remote_address=" + a)}, []Descriptor{overridden(a, limit)}
	}
	for _, bc := range []struct {
		name string
		ds   [][]Descriptor
	}{{"configured", plain}, {"override", over}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			i := 0
			for b.Loop() {
				if _, err := e.Check(ctx, Request{Domain: "edge", Descriptors: bc.ds[i%keys]}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
