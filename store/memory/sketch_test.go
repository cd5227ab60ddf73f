package memory

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestSketchShares checks that the sketches of one shard, one per kind of
// limit that evicted a state, share the shard's budget: the first folds
// when the second arrives, and neither charges an evicted actor less than
// it had spent.
func TestSketchShares(t *testing.T) {
	s, room := capStore(t)
	budget := s.maxBytes / sketchShare
	gcra := []sluice.Limit{{Rate: 10, Period: time.Hour}}
	fixed := []sluice.Limit{{Rate: 10, Period: time.Hour, Algorithm: sluice.FixedWindow}}
	for i := range 2 * room {
		mustDecide(t, s, sluice.Request{Key: key(i), Limits: gcra, Cost: 9, Now: t0})
	}
	first := s.sketchBytes.Load()
	if first == 0 || first > budget {
		t.Fatalf("one sketch counts %d bytes, want some, at most %d", first, budget)
	}
	for i := 2 * room; i < 4*room; i++ {
		mustDecide(t, s, sluice.Request{Key: key(i), Limits: fixed, Cost: 9, Now: t0})
	}
	if both := s.sketchBytes.Load(); both > budget {
		t.Errorf("two sketches count %d bytes, want at most %d", both, budget)
	}
	for i := range 4 * room {
		l := gcra
		if i >= 2*room {
			l = fixed
		}
		if d := mustDecide(t, s, sluice.Request{Key: key(i), Limits: l, Op: sluice.OpPeek, Cost: 2, Now: t0}); d.Allowed {
			t.Errorf("peek(%s, 2 of the 1 left) allowed", key(i))
		}
	}
	// Two kinds share one shard's slots: the store may run over its cap
	// by a chunk (see makeRoom).
	if b := s.Bytes(); b > s.maxBytes+s.maxBytes/2 {
		t.Errorf("Bytes() = %d, want about MaxBytes %d", b, s.maxBytes)
	}
}

// TestSketchLapses checks that a sweep lets go of a sketch once every
// state it summarises is back to empty, and of its table once empty too.
func TestSketchLapses(t *testing.T) {
	s, room := capStore(t)
	hourly := []sluice.Limit{{Rate: 1, Period: time.Hour}}
	for i := range 2 * room {
		mustDecide(t, s, sluice.Request{Key: key(i), Limits: hourly, Cost: 1, Now: t0})
	}
	if s.sketchBytes.Load() == 0 {
		t.Fatal("no sketch after evictions of states over their limit")
	}
	s.sweep()
	if s.sketchBytes.Load() == 0 {
		t.Fatal("a sweep let go of a sketch that still charges")
	}
	// A request two hours on moves the shard's time: then all is empty.
	mustDecide(t, s, sluice.Request{Key: "other", Limits: []sluice.Limit{{Rate: 1, Period: time.Second}}, Op: sluice.OpPeek, Cost: 1, Now: t0.Add(2 * time.Hour)})
	s.sweep()
	if got, n := s.Bytes(), len(s.shards[0].tables); got != 0 || n != 0 {
		t.Errorf("after the sweep two hours on: Bytes() = %d, %d tables; want 0, 0", got, n)
	}
}

// TestSketchSparesSafeToForget checks that a key the store evicted is
// charged from the sketch, and its denial marked Estimated, unless its
// request marks it safe to forget: then it starts fresh, for a collision
// in the sketch must not grant a privilege (or ban an innocent).
func TestSketchSparesSafeToForget(t *testing.T) {
	for _, alg := range []sluice.Algorithm{sluice.GCRA, sluice.FixedWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			s, room := capStore(t)
			hourly := []sluice.Limit{{Rate: 1, Period: time.Hour, Algorithm: alg}}
			for i := range 4 * room {
				mustDecide(t, s, sluice.Request{Key: key(i), Limits: hourly, Cost: 1, Now: t0})
			}
			fresh := 0
			for i := range 4 * room {
				r := sluice.Request{Key: key(i), Limits: hourly, Op: sluice.OpPeek, Cost: 1, Now: t0, SafeToForget: true}
				if d := mustDecide(t, s, r); !d.Allowed {
					if d.Estimated {
						t.Errorf("held %s: denial marked Estimated", r.Key)
					}
					continue // held: spent, safe to forget or not
				}
				fresh++
				r.SafeToForget = false
				if d := mustDecide(t, s, r); d.Allowed || !d.Estimated {
					t.Errorf("evicted %s, spent: %+v, want an Estimated denial, charged from the sketch", r.Key, d)
				}
			}
			if fresh < 3*room {
				t.Errorf("%d of %d keys fresh when safe to forget, want the %d or more evicted", fresh, 4*room, 3*room)
			}
		})
	}
}
