package memory

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// capStore returns a one-shard store without sweeper whose states have
// room for exactly n GCRA states of 4-byte keys, beside its sketches'
// share.
func capStore(t *testing.T, n int) *Store {
	t.Helper()
	s := New(Config{Shards: 1, SweepInterval: -1, MaxBytes: roomFor(int64(n) * entryBytes("k000", 1))})
	t.Cleanup(func() { s.Close() })
	return s
}

// roomFor returns the least MaxBytes whose states' share is at least b.
func roomFor(b int64) int64 {
	m := b
	for m-m/sketchShare < b {
		m++
	}
	return m
}

func key(i int) string { return fmt.Sprintf("k%03d", i) }

// TestCapFullOfOverLimit fills the store with actors over their limit,
// then sends new ones: every new actor is decided (no error), the store
// stays within its cap, and no actor over its limit is let through,
// whether it was evicted or not. An hour on, the charges have lapsed.
func TestCapFullOfOverLimit(t *testing.T) {
	s := capStore(t, 20)
	hourly := []sluice.Limit{{Rate: 1, Period: time.Hour}}
	for i := range 20 {
		mustDecide(t, s, sluice.Request{Key: key(i), Limits: hourly, Cost: 1, Now: t0})
	}
	for i := 20; i < 60; i++ {
		mustDecide(t, s, sluice.Request{Key: key(i), Limits: hourly, Cost: 1, Now: t0})
		if n, b := s.Len(), s.Bytes(); n > 20 || b > s.maxBytes {
			t.Fatalf("after %d actors: Len, Bytes = %d, %d; want at most 20, %d", i+1, n, b, s.maxBytes)
		}
	}
	admitted := 0
	for i := range 60 {
		if d := mustDecide(t, s, sluice.Request{Key: key(i), Limits: hourly, Cost: 1, Now: t0.Add(time.Minute)}); d.Allowed {
			admitted++
		}
	}
	if admitted != 0 {
		t.Errorf("%d actors over their limit admitted again within the hour, want 0", admitted)
	}
	// A peek and a refund of a new actor need no room.
	for _, op := range []sluice.Op{sluice.OpPeek, sluice.OpRefund} {
		if _, err := s.Decide(context.Background(), sluice.Request{Key: key(99), Limits: hourly, Op: op, Cost: 1, Now: t0, At: t0}); err != nil {
			t.Errorf("Decide(%v of a new key in a full store) error: %v", op, err)
		}
	}
	// An hour on, the states and the sketch's charges are back to empty.
	// (Peeks: a take would evict a state spent anew, and charge its cells.)
	later := t0.Add(time.Hour + 2*time.Minute)
	for i := range 60 {
		if d := mustDecide(t, s, sluice.Request{Key: key(i), Limits: hourly, Op: sluice.OpPeek, Cost: 1, Now: later}); !d.Allowed {
			t.Errorf("peek(%s) an hour on: denied", key(i))
		}
	}
}

// TestCapEvictsClosestToFull checks that eviction picks the actor with the
// most allowance left, and that the sketch charges it, on its return,
// what it had spent.
func TestCapEvictsClosestToFull(t *testing.T) {
	s := capStore(t, 20)
	tens := []sluice.Limit{{Rate: 10, Period: time.Hour}}
	for i := range 20 {
		cost := 9
		if i == 7 {
			cost = 1 // the lightest user
		}
		mustDecide(t, s, sluice.Request{Key: key(i), Limits: tens, Cost: cost, Now: t0})
	}
	mustDecide(t, s, sluice.Request{Key: key(20), Limits: tens, Cost: 1, Now: t0})
	if s.Len() != 20 {
		t.Fatalf("Len() = %d, want 20", s.Len())
	}
	// k007 was evicted, the only one: its cells hold its spend alone.
	if _, ok := s.shards[0].table(&tens[0]).lookup("", key(7), s.hash("", key(7))); ok {
		t.Errorf("%s still held: eviction did not pick the lightest user", key(7))
	}
	for i := range 21 {
		d := mustDecide(t, s, sluice.Request{Key: key(i), Limits: tens, Op: sluice.OpPeek, Cost: 1, Now: t0})
		want := 0 // 9 taken: one left, and a peek of 1 leaves 0
		switch i {
		case 7, 20:
			want = 8 // 1 taken: charged back by the sketch for k007
		}
		if d.Remaining != want {
			t.Errorf("peek(%s) Remaining = %d, want %d", key(i), d.Remaining, want)
		}
	}
}

// TestCapPolicy checks that a policy take in a full store makes room for
// all its states, and commits to every limit.
func TestCapPolicy(t *testing.T) {
	s := capStore(t, 20)
	tens := sluice.Limit{Rate: 10, Period: time.Hour}
	for i := range 19 {
		mustDecide(t, s, sluice.Request{Key: key(i), Limits: []sluice.Limit{tens}, Cost: 10, Now: t0})
	}
	mustDecide(t, s, sluice.Request{Key: "kpol", Limits: []sluice.Limit{tens}, Cost: 5, Now: t0})
	fixed := sluice.Limit{Rate: 10, Period: time.Hour, Algorithm: sluice.FixedWindow}
	policy := []sluice.Limit{tens, fixed}
	if d := mustDecide(t, s, sluice.Request{Key: "kpol", Limits: policy, Cost: 1, Now: t0}); !d.Allowed {
		t.Fatalf("policy take in a full store: denied, want allowed")
	}
	for _, c := range []struct {
		l    sluice.Limit
		want int
	}{{tens, 3}, {fixed, 8}} {
		d := mustDecide(t, s, sluice.Request{Key: "kpol", Limits: []sluice.Limit{c.l}, Op: sluice.OpPeek, Cost: 1, Now: t0})
		if d.Remaining != c.want {
			t.Errorf("peek(kpol, %v) Remaining = %d, want %d", c.l, d.Remaining, c.want)
		}
	}
	for i := range 19 {
		if d := mustDecide(t, s, sluice.Request{Key: key(i), Limits: []sluice.Limit{tens}, Op: sluice.OpPeek, Cost: 1, Now: t0}); d.Allowed {
			t.Errorf("peek(%s) allowed: an evicted actor got its allowance back", key(i))
		}
	}
}

// TestCapTooLarge checks the one way a take can still fail for room: a
// request whose states alone need more than MaxBytes.
func TestCapTooLarge(t *testing.T) {
	s := capStore(t, 20)
	huge := []sluice.Limit{{Rate: 10_000, Period: time.Hour, Algorithm: sluice.SlidingLog}}
	_, err := s.Decide(context.Background(), sluice.Request{Key: "k", Limits: huge, Cost: 1, Now: t0})
	if !errors.Is(err, sluice.ErrStoreFull) || !errors.Is(err, sluice.ErrStore) {
		t.Fatalf("Decide(a log of 80 kB under MaxBytes %d) error = %v, want ErrStoreFull wrapping ErrStore", s.maxBytes, err)
	}
	if s.Len() != 0 || s.Bytes() != 0 {
		t.Errorf("after ErrStoreFull: Len, Bytes = %d, %d; want 0, 0", s.Len(), s.Bytes())
	}
}

// TestBytes checks the store's byte count through inserts, resets and
// rate changes of a sliding log.
func TestBytes(t *testing.T) {
	s := New(Config{SweepInterval: -1})
	defer s.Close()
	log := sluice.Limit{Rate: 10, Period: time.Minute, Algorithm: sluice.SlidingLog}
	policy := []sluice.Limit{{Rate: 5, Period: time.Second}, log}
	mustDecide(t, s, sluice.Request{Key: "abc", Limits: policy, Cost: 1, Now: t0})
	want := entryBytes("abc", 1) + entryBytes("abc", 11)
	if got := s.Bytes(); got != want {
		t.Errorf("Bytes() = %d, want %d", got, want)
	}
	log.Rate = 20
	mustDecide(t, s, sluice.Request{Key: "abc", Limits: []sluice.Limit{log}, Cost: 1, Now: t0})
	want += 8 * 10
	if got := s.Bytes(); got != want {
		t.Errorf("Bytes() after the log's rate doubled = %d, want %d", got, want)
	}
	mustDecide(t, s, sluice.Request{Key: "abc", Limits: policy, Op: sluice.OpReset, Now: t0})
	if got, n := s.Bytes(), s.Len(); got != 0 || n != 0 {
		t.Errorf("after reset: Bytes(), Len() = %d, %d; want 0, 0", got, n)
	}
}

// TestCapSparesRequestKey checks that making room never drops a state of
// the request being decided, even one back to empty: the take must count,
// even if that leaves the store over its cap until the next insert.
func TestCapSparesRequestKey(t *testing.T) {
	// Room for two GCRA states and a little: dropping k000's would make
	// room for the fixed-window state below.
	s := New(Config{Shards: 1, SweepInterval: -1, MaxBytes: roomFor(2*entryBytes("k000", 1) + 10)})
	defer s.Close()
	hourly := sluice.Limit{Rate: 2, Period: time.Hour}
	fixed := sluice.Limit{Rate: 2, Period: time.Hour, Algorithm: sluice.FixedWindow}
	mustDecide(t, s, sluice.Request{Key: "k000", Limits: []sluice.Limit{hourly}, Cost: 1, Now: t0})
	mustDecide(t, s, sluice.Request{Key: "k001", Limits: []sluice.Limit{hourly}, Cost: 2, Now: t0})
	// Hours later k000's state is empty and k001 is over its limit again:
	// making room for k000's fixed window may evict k001, never k000.
	later := t0.Add(3 * time.Hour)
	mustDecide(t, s, sluice.Request{Key: "k001", Limits: []sluice.Limit{hourly}, Cost: 2, Now: later})
	mustDecide(t, s, sluice.Request{Key: "k000", Limits: []sluice.Limit{hourly, fixed}, Cost: 1, Now: later})
	if d := mustDecide(t, s, sluice.Request{Key: "k000", Limits: []sluice.Limit{hourly}, Op: sluice.OpPeek, Cost: 1, Now: later}); d.Remaining != 0 {
		t.Errorf("after a take of 1 of 2, peek Remaining = %d, want 0: the take was lost", d.Remaining)
	}
	if d := mustDecide(t, s, sluice.Request{Key: "k001", Limits: []sluice.Limit{hourly}, Op: sluice.OpPeek, Cost: 1, Now: later}); d.Allowed {
		t.Errorf("k001, over its limit, allowed after the eviction")
	}
}
