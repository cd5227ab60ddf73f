package algorithm

import (
	"math/rand/v2"
	"testing"
)

// sec is one second in Unix ns, the grid of the quota tests.
const sec = int64(1e9)

func TestQuotaLevel(t *testing.T) {
	tests := []struct {
		name    string
		demands []int64
		limit   int64
		want    int64
	}{
		{"empty", nil, 1000, 1000},
		{"all fit", []int64{100, 200}, 1000, 1000},
		{"one over", []int64{100, 2000}, 1000, 900},
		{"equal over", []int64{600, 600}, 1000, 500},
		// 1:2:…:8 of 50/s into 1,000/s: 50 and 100 fit, six share 850.
		{"skewed", []int64{50, 100, 150, 200, 250, 300, 350, 400}, 1000, 141},
		{"unknown counts as the limit", []int64{UnknownDemand, 100}, 1000, 900},
		{"zero demands", []int64{0, 0, 0}, 10, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var q QuotaTable
			for i, d := range tt.demands {
				q.Holders = append(q.Holders, QuotaHolder{ID: string(rune('a' + i)), Demand: d, Exp: sec})
			}
			if got := q.Level(tt.limit); got != tt.want {
				t.Errorf("Level(%d) of %v = %d, want %d", tt.limit, tt.demands, got, tt.want)
			}
		})
	}
}

// TestQuotaShare plays calls on a time grid of whole seconds and checks
// each share granted.
func TestQuotaShare(t *testing.T) {
	type call struct {
		at      int64 // seconds
		id      string
		demand  int64
		release bool
		want    int64
		ok      bool
	}
	const limit, ttl, maxHolders = 1000, 3, 3
	tests := []struct {
		name  string
		calls []call
	}{
		{"alone, its demand", []call{{0, "a", 300, false, 300, true}}},
		{"unknown gets what is free", []call{
			{0, "a", 300, false, 300, true},
			{0, "b", UnknownDemand, false, 700, true},
		}},
		{"grows only into what is free", []call{
			{0, "a", UnknownDemand, false, 1000, true},
			{0, "b", UnknownDemand, false, 0, true}, // a holds it all
			{1, "a", UnknownDemand, false, 500, true},
			{1, "b", UnknownDemand, false, 500, true},
		}},
		{"shrinks at once", []call{
			{0, "a", 800, false, 800, true},
			{0, "b", 200, false, 200, true},
			{1, "a", 100, false, 100, true},
			{1, "b", 900, false, 900, true},
		}},
		{"keeps a share within 1/40", []call{
			{0, "a", 400, false, 400, true},
			{1, "a", 409, false, 400, true},
			{2, "a", 391, false, 400, true},
			{3, "a", 411, false, 411, true},
		}},
		{"expired share is free again", []call{
			{0, "a", UnknownDemand, false, 1000, true},
			{1, "b", 500, false, 0, true},
			{3, "b", 500, false, 500, true}, // a expired at 3
		}},
		{"release gives back", []call{
			{0, "a", UnknownDemand, false, 1000, true},
			{1, "a", 0, true, 0, true},
			{1, "b", 500, false, 500, true},
		}},
		{"a full table refuses a newcomer, not its holders", []call{
			{0, "a", 100, false, 100, true},
			{0, "b", 100, false, 100, true},
			{0, "c", 100, false, 100, true},
			{0, "d", 100, false, 0, false},
			{1, "a", 200, false, 200, true},
		}},
		{"over the limit is the limit", []call{{0, "a", 5000, false, 1000, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var q QuotaTable
			for i, c := range tt.calls {
				now := c.at * sec
				if c.release {
					q.Release(c.id, now)
					continue
				}
				got, ok := q.Share(c.id, c.demand, limit, 0, now, now+ttl*sec, maxHolders)
				if got != c.want || ok != c.ok {
					t.Errorf("call %d: Share(%q, %d) at %ds = %d, %v; want %d, %v", i, c.id, c.demand, c.at, got, ok, c.want, c.ok)
				}
				if g := q.Granted(); g > limit {
					t.Errorf("call %d: granted %d > limit %d", i, g, limit)
				}
			}
		})
	}
}

// TestQuotaConverges checks that holders asking in turn, each every
// second, reach their max-min fair shares by their second round.
func TestQuotaConverges(t *testing.T) {
	demands := []int64{50, 100, 150, 200, 250, 300, 350, 400}
	const limit = 1000
	var q QuotaTable
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for round := range int64(3) {
		for i, id := range ids {
			q.Share(id, demands[i], limit, 0, round*sec, (round+3)*sec, 16)
		}
	}
	level := q.Level(limit)
	for i, h := range q.Holders {
		want := min(demands[i], level)
		if d := abs(h.Share - want); d*Hysteresis > want {
			t.Errorf("holder %s: share %d, fair %d", h.ID, h.Share, want)
		}
	}
}

// TestQuotaInvariant plays random traces: the shares granted never sum
// past the limit.
func TestQuotaInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trace := range 200 {
		var q QuotaTable
		limit := 1 + rng.Int64N(2000)
		now := int64(0)
		for step := range 300 {
			now += rng.Int64N(sec / 2)
			id := string(rune('a' + rng.IntN(10)))
			if rng.IntN(20) == 0 {
				q.Release(id, now)
				continue
			}
			demand := rng.Int64N(2*limit+1) - 1
			q.Share(id, demand, limit, rng.Int64N(limit/4+1), now, now+1+rng.Int64N(3*sec), 8)
			if g := q.Granted(); g > limit {
				t.Fatalf("trace %d step %d: granted %d > limit %d: %+v", trace, step, g, limit, q.Holders)
			}
		}
	}
}

// TestQuotaReserve: with a reserve, a newcomer gets a share at once
// while the others hold all they may, the next one half of what is left;
// the holders shrink to the level of limit − reserve as they ask again,
// which restores the reserve, and no holder is cut below what it holds
// and deserves for the reserve's sake.
func TestQuotaReserve(t *testing.T) {
	const limit, reserve = 1000, 50
	type call struct {
		at         int64 // seconds
		id         string
		demand     int64
		want, free int64 // the share, and what is free after the call
	}
	tests := []struct {
		name  string
		calls []call
	}{
		{"a newcomer gets half of the reserve, the next half of the rest", []call{
			{0, "a", UnknownDemand, 950, 50},
			{0, "b", UnknownDemand, 25, 25},
			{0, "c", UnknownDemand, 13, 12},
			{1, "a", 2000, 316, 646}, // the level of 950 among three who want it all
			{1, "b", 2000, 316, 355},
			{1, "c", 2000, 316, 52},
			{1, "d", UnknownDemand, 26, 26},
		}},
		{"saturated holders leave the reserve free", []call{
			{0, "a", 600, 600, 400},
			{0, "b", 600, 350, 50},
			{1, "a", 600, 475, 175},
			{1, "b", 600, 475, 50},
			{1, "c", UnknownDemand, 25, 25},
		}},
		{"a holder keeps what it holds and deserves", []call{
			{0, "a", 900, 900, 100},
			{0, "c", 50, 50, 50},
			{0, "b", UnknownDemand, 25, 25},
			{1, "c", 50, 50, 25}, // not cut to restore the reserve
		}},
		// An attacker's flood of new holders takes the reserve and no more:
		// the holder already there keeps its 950 (granted stays 950 + what
		// the newcomers took, at most the reserve of 50), and a newcomer
		// past it holds nothing.
		{"a flood of newcomers takes the reserve, not the holders' shares", []call{
			{0, "a", 2000, 950, 50},
			{0, "n1", UnknownDemand, 25, 25},
			{0, "n2", UnknownDemand, 13, 12},
			{0, "n3", UnknownDemand, 6, 6},
			{0, "n4", UnknownDemand, 3, 3},
			{0, "n5", UnknownDemand, 2, 1},
			{0, "n6", UnknownDemand, 1, 0},
			{0, "n7", UnknownDemand, 0, 0},
			{0, "n8", UnknownDemand, 0, 0},
		}},
		// The six b hold 134, the level before s asked for 4 more, and keep
		// it by Hysteresis at the level of 133 after: s may take those six
		// units of the reserve, not stay held at 46 below its demand.
		{"the others' kept shares do not hold a holder below its fair share", []call{
			{0, "s", 46, 46, 954},
			{0, "m", 100, 100, 854},
			{0, "b1", 140, 140, 714},
			{0, "b2", 140, 140, 574},
			{0, "b3", 140, 140, 434},
			{0, "b4", 140, 140, 294},
			{0, "b5", 140, 140, 154},
			{0, "b6", 140, 104, 50},
			{1, "b1", 140, 134, 56},
			{1, "b2", 140, 134, 62},
			{1, "b3", 140, 134, 68},
			{1, "b4", 140, 134, 74},
			{1, "b5", 140, 134, 80},
			{1, "b6", 140, 134, 50},
			{2, "s", 50, 50, 46},
			{2, "b1", 140, 134, 46},
		}},
		{"what fits is granted beyond the reserve", []call{
			{0, "a", 100, 100, 900},
			{0, "b", 200, 200, 700},
			{0, "c", UnknownDemand, 650, 50},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var q QuotaTable
			for i, c := range tt.calls {
				now := c.at * sec
				got, _ := q.Share(c.id, c.demand, limit, reserve, now, now+3*sec, 16)
				if free := limit - q.Granted(); got != c.want || free != c.free {
					t.Errorf("call %d: Share(%q, %d) at %ds = %d, %d free; want %d, %d free", i, c.id, c.demand, c.at, got, free, c.want, c.free)
				}
			}
		})
	}
}

func TestQuotaCodec(t *testing.T) {
	q := QuotaTable{Holders: []QuotaHolder{{"a", UnknownDemand, 10, 5}, {"holder-b", 200, 190, 7}}}
	b, err := q.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeQuotaTable(b, 8)
	if err != nil || len(got.Holders) != 2 || got.Holders[0] != q.Holders[0] || got.Holders[1] != q.Holders[1] {
		t.Fatalf("DecodeQuotaTable = %+v, %v; want %+v", got, err, q)
	}
	for _, bad := range [][]byte{nil, {2}, b[:len(b)-1], append(append([]byte(nil), b...), 0)} {
		if _, err := DecodeQuotaTable(bad, 8); err != ErrCorruptQuota {
			t.Errorf("DecodeQuotaTable(%x) = %v, want ErrCorruptQuota", bad, err)
		}
	}
	if _, err := DecodeQuotaTable(b, 1); err != ErrCorruptQuota {
		t.Errorf("DecodeQuotaTable over max = %v, want ErrCorruptQuota", err)
	}
}
