package memory

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// capStore returns a one-shard store without sweeper that has room for
// exactly n GCRA states of 4-byte keys.
func capStore(t *testing.T, n int) *Store {
	t.Helper()
	s := New(Config{Shards: 1, SweepInterval: -1, MaxBytes: int64(n) * entryBytes("k000", 1)})
	t.Cleanup(func() { s.Close() })
	return s
}

func key(i int) string { return fmt.Sprintf("k%03d", i) }

// TestCapNeverEvictsOverLimit fills the store with actors over their
// limit: a new actor gets ErrStoreFull, and none of them is forgotten.
func TestCapNeverEvictsOverLimit(t *testing.T) {
	s := capStore(t, 20)
	hourly := []sluice.Limit{{Rate: 1, Period: time.Hour}}
	for i := range 20 {
		mustDecide(t, s, sluice.Request{Key: key(i), Limits: hourly, Cost: 1, Now: t0})
	}
	bytes := s.Bytes()
	_, err := s.Decide(context.Background(), sluice.Request{Key: key(20), Limits: hourly, Cost: 1, Now: t0})
	if !errors.Is(err, sluice.ErrStoreFull) || !errors.Is(err, sluice.ErrStore) {
		t.Fatalf("Decide(new key in a full store) error = %v, want ErrStoreFull wrapping ErrStore", err)
	}
	if got := s.Bytes(); got != bytes || s.Len() != 20 {
		t.Errorf("after ErrStoreFull: Len, Bytes = %d, %d; want 20, %d", s.Len(), got, bytes)
	}
	for i := range 20 {
		if d := mustDecide(t, s, sluice.Request{Key: key(i), Limits: hourly, Op: sluice.OpPeek, Cost: 1, Now: t0}); d.Allowed {
			t.Errorf("peek(%s) allowed: an actor over its limit was evicted", key(i))
		}
	}
	// A peek, a refund and a denied take need no room.
	for _, op := range []sluice.Op{sluice.OpPeek, sluice.OpRefund} {
		if _, err := s.Decide(context.Background(), sluice.Request{Key: key(99), Limits: hourly, Op: op, Cost: 1, Now: t0, At: t0}); err != nil {
			t.Errorf("Decide(%v of a new key in a full store) error: %v", op, err)
		}
	}
	// An hour on, the states are back to empty: they make room.
	later := t0.Add(time.Hour + 2*time.Second)
	for i := 20; i < 40; i++ {
		if d := mustDecide(t, s, sluice.Request{Key: key(i), Limits: hourly, Cost: 1, Now: later}); !d.Allowed {
			t.Errorf("take(%s) an hour on: denied", key(i))
		}
	}
	if got := s.Len(); got != 20 {
		t.Errorf("Len() = %d, want 20", got)
	}
}

// TestCapEvictsClosestToFull checks that eviction picks the actor with the
// most allowance left, and that a policy that cannot get room commits to
// none of its limits.
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
	for i := range 21 {
		d := mustDecide(t, s, sluice.Request{Key: key(i), Limits: tens, Op: sluice.OpPeek, Cost: 1, Now: t0})
		want := 0 // 9 taken: one left, and a peek of 1 leaves 0
		switch i {
		case 7:
			want = 9 // evicted: a fresh actor
		case 20:
			want = 8
		}
		if d.Remaining != want {
			t.Errorf("peek(%s) Remaining = %d, want %d", key(i), d.Remaining, want)
		}
	}
}

// TestCapPolicyAllOrNothing checks that a policy take that cannot get room
// for one of its states commits to none of them.
func TestCapPolicyAllOrNothing(t *testing.T) {
	s := capStore(t, 20)
	tens := sluice.Limit{Rate: 10, Period: time.Hour}
	for i := range 19 {
		mustDecide(t, s, sluice.Request{Key: key(i), Limits: []sluice.Limit{tens}, Cost: 10, Now: t0})
	}
	mustDecide(t, s, sluice.Request{Key: "kpol", Limits: []sluice.Limit{tens}, Cost: 5, Now: t0})
	policy := []sluice.Limit{tens, {Rate: 10, Period: time.Hour, Algorithm: sluice.FixedWindow}}
	_, err := s.Decide(context.Background(), sluice.Request{Key: "kpol", Limits: policy, Cost: 1, Now: t0})
	if !errors.Is(err, sluice.ErrStoreFull) {
		t.Fatalf("Decide(policy, full store) error = %v, want ErrStoreFull", err)
	}
	if got := s.Len(); got != 20 {
		t.Errorf("Len() = %d after a failed policy take, want 20", got)
	}
	d := mustDecide(t, s, sluice.Request{Key: "kpol", Limits: []sluice.Limit{tens}, Op: sluice.OpPeek, Cost: 1, Now: t0})
	if d.Remaining != 4 {
		t.Errorf("peek(kpol) Remaining = %d, want 4: the failed take consumed", d.Remaining)
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
// the request being decided, even one back to empty: the take must count.
func TestCapSparesRequestKey(t *testing.T) {
	// Room for two GCRA states and a little: dropping k000's would make
	// room for the fixed-window state below.
	s := New(Config{Shards: 1, SweepInterval: -1, MaxBytes: 2*entryBytes("k000", 1) + 10})
	defer s.Close()
	hourly := sluice.Limit{Rate: 2, Period: time.Hour}
	fixed := sluice.Limit{Rate: 2, Period: time.Hour, Algorithm: sluice.FixedWindow}
	mustDecide(t, s, sluice.Request{Key: "k000", Limits: []sluice.Limit{hourly}, Cost: 1, Now: t0})
	mustDecide(t, s, sluice.Request{Key: "k001", Limits: []sluice.Limit{hourly}, Cost: 2, Now: t0})
	// Hours later k000's state is empty and k001 is over its limit: the
	// only state that could go to make room for k000's fixed window is
	// k000's own GCRA state, which this very request uses.
	later := t0.Add(3 * time.Hour)
	mustDecide(t, s, sluice.Request{Key: "k001", Limits: []sluice.Limit{hourly}, Cost: 2, Now: later})
	_, err := s.Decide(context.Background(), sluice.Request{Key: "k000", Limits: []sluice.Limit{hourly, fixed}, Cost: 1, Now: later})
	if err == nil {
		if d := mustDecide(t, s, sluice.Request{Key: "k000", Limits: []sluice.Limit{hourly}, Op: sluice.OpPeek, Cost: 1, Now: later}); d.Remaining != 0 {
			t.Errorf("after a take of 1 of 2, peek Remaining = %d, want 0: the take was lost", d.Remaining)
		}
	} else if !errors.Is(err, sluice.ErrStoreFull) {
		t.Errorf("Decide error = %v, want nil or ErrStoreFull", err)
	}
}
