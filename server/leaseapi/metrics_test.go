package leaseapi

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/store/memory"
)

// TestMetrics counts grants, refusals, releases and expiries; a release
// or extension with the ID of a lease of another key, which the store
// refuses, is not taken for that lease's end.
func TestMetrics(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ms := memory.New(memory.Config{Clock: func() time.Time { return now }})
	defer ms.Close()
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	m.clock = func() time.Time { return now }
	l, err := New(Config{Store: ms, Metrics: m, Rules: []config.ConcurrencyRule{{Name: "reports", Limit: 2, TTL: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var ids []string
	for range 3 {
		res, err := l.Acquire(ctx, AcquireRequest{Rule: "reports", Key: "tenant-1", Class: sluice.ClassCritical})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	for _, call := range []func(string, string, string) (Result, error){
		func(r, k, id string) (Result, error) { return l.Release(ctx, r, k, id) },
		func(r, k, id string) (Result, error) { return l.Extend(ctx, r, k, id) },
	} {
		if res, err := call("reports", "tenant-2", ids[0]); err != nil || res.OK {
			t.Fatalf("a call on another key = %+v, %v; want refused", res, err)
		}
	}
	if res, err := l.Release(ctx, "reports", "tenant-1", ids[0]); err != nil || !res.OK {
		t.Fatalf("Release = %+v, %v", res, err)
	}
	for name, want := range map[string]float64{
		`sluice_concurrency_acquires_total{class="critical",result="granted",rule="reports"}`: 2,
		`sluice_concurrency_acquires_total{class="critical",result="refused",rule="reports"}`: 1,
		`sluice_concurrency_in_flight{rule="reports"}`:                                        1,
		`sluice_concurrency_releases_total{rule="reports"}`:                                   1,
		`sluice_concurrency_lease_expiries_total{rule="reports"}`:                             0,
	} {
		if got := gather(t, reg)[name]; got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	now = now.Add(2 * time.Minute) // the lease of ids[1] expires unreleased
	gather(t, reg)                 // sweeps it: counted by the next gathering
	got := gather(t, reg)
	if n, e := got[`sluice_concurrency_in_flight{rule="reports"}`], got[`sluice_concurrency_lease_expiries_total{rule="reports"}`]; n != 0 || e != 1 {
		t.Errorf("after the expiry: %v in flight, %v expired; want 0, 1", n, e)
	}
}

// gather returns the values of reg's metrics by name{label="value",...},
// labels in the registry's order (sorted by name).
func gather(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}
