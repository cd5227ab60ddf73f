package loggen

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicehq/sluice/simulate/accesslog"
)

// TestGenerated checks that a day of traffic has every kind of client in
// realistic proportions, that its lines parse back to its events, and
// that the load follows the day.
func TestGenerated(t *testing.T) {
	const n = 200_000
	g, parse := New(n, Config{Seed: 7}), new(accesslog.Combined)
	kinds := map[Kind]int{}
	addrs := map[Kind]map[netip.Addr]bool{}
	var hours [24]int
	var prev time.Time
	var e accesslog.Entry
	for i := range n {
		ev := g.Next()
		if ev.Time.Before(prev) {
			t.Fatalf("event %d at %v, before %v", i, ev.Time, prev)
		}
		prev = ev.Time
		kinds[ev.Kind]++
		if addrs[ev.Kind] == nil {
			addrs[ev.Kind] = map[netip.Addr]bool{}
		}
		addrs[ev.Kind][ev.Addr] = true
		hours[ev.Time.Hour()]++
		line := g.AppendCombined(nil, ev)
		if err := parse.Parse(line, &e); err != nil {
			t.Fatalf("Parse(%q) = %v", line, err)
		}
		if e.Time != ev.Time.Truncate(time.Second).UnixNano() || !bytes.Equal(e.Addr, []byte(ev.Addr.String())) || string(e.URI) != ev.URI || e.Status != ev.Status {
			t.Fatalf("Parse(%q) = %+v, want the event %+v", line, e, ev)
		}
	}
	if d := prev.Sub(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)); d < 23*time.Hour || d > 25*time.Hour {
		t.Errorf("the log spans %v, want about 24h", d)
	}
	for _, c := range []struct {
		k        Kind
		min, max int // share of requests, per mille
		minAddrs int
		maxAddrs int
	}{
		{Human, 870, 930, 10_000, 100_000},
		{Botnet, 20, 50, 3000, 4096},
		{Rotator, 15, 25, n / 100, n / 40},
		{Crawler, 40, 60, 1, 1},
	} {
		share := kinds[c.k] * 1000 / n
		if share < c.min || share > c.max || len(addrs[c.k]) < c.minAddrs || len(addrs[c.k]) > c.maxAddrs {
			t.Errorf("kind %d: %d‰ of requests from %d addresses, want %d–%d‰ from %d–%d", c.k, share, len(addrs[c.k]), c.min, c.max, c.minAddrs, c.maxAddrs)
		}
	}
	for a := range addrs[Botnet] {
		if !netip.MustParsePrefix("198.18.0.0/16").Contains(a) {
			t.Fatalf("bot %v outside 198.18.0.0/16", a)
		}
	}
	if hours[16] < 2*hours[4] {
		t.Errorf("requests at 16:00 = %d, at 04:00 = %d: want the afternoon busier by far", hours[16], hours[4])
	}
}
