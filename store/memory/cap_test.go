package memory

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// capBytes is the MaxBytes of the stores of the cap tests: room for a
// few dozen GCRA states.
const capBytes = 2048

// capStore returns a one-shard store without sweeper of MaxBytes
// capBytes, and how many GCRA states of 4-byte keys it holds (found by
// filling a twin until it first evicts: the count follows the sizes of
// the chunks it allocates, not of each state).
func capStore(t *testing.T) (*Store, int) { return capStorePrefix(t, "") }

// capStorePrefix is capStore for keys under prefix.
func capStorePrefix(t *testing.T, prefix string) (*Store, int) {
	t.Helper()
	return capStoreOf(t, prefix, capBytes)
}

// capStoreOf is capStore for keys under prefix, of MaxBytes maxBytes.
func capStoreOf(t *testing.T, prefix string, maxBytes int64) (*Store, int) {
	t.Helper()
	cfg := Config{Shards: 1, SweepInterval: -1, MaxBytes: maxBytes}
	twin := New(cfg)
	defer twin.Close()
	n := 0
	for twin.Len() == n {
		mustDecide(t, twin, sluice.Request{Prefix: prefix, Key: key(n), Limits: []sluice.Limit{{Rate: 10, Period: time.Hour}}, Cost: 9, Now: t0})
		n++
	}
	n-- // the last insert evicted
	if n < 10 {
		t.Fatalf("a store of %d bytes holds %d GCRA states, want at least 10", maxBytes, n)
	}
	s := New(cfg)
	t.Cleanup(func() { s.Close() })
	return s, n
}

func key(i int) string { return fmt.Sprintf("k%03d", i) }

// TestCapFullOfOverLimit fills the store with actors over their limit,
// then sends new ones: every new actor is decided (no error), the store
// stays within its cap, and no actor over its limit is let through,
// whether it was evicted or not. An hour on, the charges have lapsed.
func TestCapFullOfOverLimit(t *testing.T) {
	s, room := capStore(t)
	hourly := []sluice.Limit{{Rate: 1, Period: time.Hour}}
	for i := range 3 * room {
		mustDecide(t, s, sluice.Request{Key: key(i), Limits: hourly, Cost: 1, Now: t0})
		if n, b := s.Len(), s.Bytes(); n > room || b > s.maxBytes {
			t.Fatalf("after %d actors: Len, Bytes = %d, %d; want at most %d, %d", i+1, n, b, room, s.maxBytes)
		}
	}
	admitted := 0
	for i := range 3 * room {
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
	// An hour on, the states and the ledger's charges are back to empty.
	// (Peeks: a take would evict a state spent anew, and charge its cells.)
	later := t0.Add(time.Hour + 2*time.Minute)
	for i := range 3 * room {
		if d := mustDecide(t, s, sluice.Request{Key: key(i), Limits: hourly, Op: sluice.OpPeek, Cost: 1, Now: later}); !d.Allowed {
			t.Errorf("peek(%s) an hour on: denied", key(i))
		}
	}
}

// TestCapEvictsClosestToFull checks that eviction picks the actor with the
// most allowance left, and that its ledger charges it, on its return,
// what it had spent; also for keys under a Prefix, which the store
// joins back to their key in scratch space while it samples.
func TestCapEvictsClosestToFull(t *testing.T) {
	for _, prefix := range []string{"", "sluice:login:"} {
		t.Run("prefix="+prefix, func(t *testing.T) { testCapEvictsClosestToFull(t, prefix) })
	}
}

func testCapEvictsClosestToFull(t *testing.T, prefix string) {
	s, room := capStorePrefix(t, prefix)
	tens := []sluice.Limit{{Rate: 10, Period: time.Hour}}
	now := t0
	take := func(i, cost int, op sluice.Op) sluice.Decision {
		return mustDecide(t, s, sluice.Request{Prefix: prefix, Key: key(i), Limits: tens, Op: op, Cost: cost, Now: now})
	}
	for i := range room {
		cost := 9
		if i == 7 {
			cost = 1 // the lightest user
		}
		take(i, cost, sluice.OpTake)
	}
	take(room, 1, sluice.OpTake)
	if s.Len() != room {
		t.Fatalf("Len() = %d, want %d", s.Len(), room)
	}
	// k007 was evicted, the only one: its cells hold its spend alone.
	if _, ok := s.shards[0].table(&tens[0]).lookup(prefix, key(7), s.hash(prefix, key(7))); ok {
		t.Errorf("%s still held: eviction did not pick the lightest user", key(7))
	}
	// A second on: the ledger rounds a GCRA tat up, by under a
	// millisecond here (see gcraUnit), which at the very instant of the
	// takes would cost k007 its last unit.
	now = t0.Add(time.Second)
	for i := range room + 1 {
		d := take(i, 1, sluice.OpPeek)
		want := 0 // 9 taken: one left, and a peek of 1 leaves 0
		switch i {
		case 7, room:
			want = 8 // 1 taken: charged back by the ledger for k007
		}
		if d.Remaining != want {
			t.Errorf("peek(%s) Remaining = %d, want %d", key(i), d.Remaining, want)
		}
	}
}

// TestCapPolicy checks that a policy take in a full store makes room for
// all its states, and commits to every limit.
func TestCapPolicy(t *testing.T) {
	s, room := capStore(t)
	tens := sluice.Limit{Rate: 10, Period: time.Hour}
	for i := range room - 1 {
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
	for i := range room - 1 {
		if d := mustDecide(t, s, sluice.Request{Key: key(i), Limits: []sluice.Limit{tens}, Op: sluice.OpPeek, Cost: 1, Now: t0}); d.Allowed {
			t.Errorf("peek(%s) allowed: an evicted actor got its allowance back", key(i))
		}
	}
}

// TestCapFloodOfLongWindowKeys floods a full store with the longest
// names a window state can have (kept apart from their slots, the most
// bytes a state costs), each over its limit, beside a few innocent
// actors of another rule: the store stays within its cap, no attacker
// is admitted again within the window though most were evicted, and
// every innocent, evicted or not, keeps what it has left. Through
// Decide, and through a Bound, which decides a held key in place and an
// evicted one by the general path and its ledger.
func TestCapFloodOfLongWindowKeys(t *testing.T) {
	for _, c := range []struct {
		alg   sluice.Algorithm
		bound bool // through a Bound of each prefix, a Limiter's way (held keys decided in place)
	}{{sluice.FixedWindow, false}, {sluice.SlidingWindow, false}, {sluice.FixedWindow, true}, {sluice.SlidingWindow, true}} {
		alg := c.alg
		t.Run(fmt.Sprintf("%v/bound=%v", alg, c.bound), func(t *testing.T) {
			s := New(Config{Shards: 1, SweepInterval: -1, MaxBytes: 8 * capBytes})
			defer s.Close()
			mustDecide := mustDecide
			if c.bound {
				mustDecide = boundDecide
			}
			flood := []sluice.Limit{{Rate: 1, Period: time.Hour, Algorithm: alg}}
			api := []sluice.Limit{{Rate: 10, Period: time.Hour}}
			const innocents, attackers = 5, 400
			for i := range innocents {
				mustDecide(t, s, sluice.Request{Prefix: "sluice:api:", Key: key(i), Limits: api, Cost: 1, Now: t0})
			}
			prefix := "sluice:form:" + strings.Repeat("x", 60) // past numbering: names kept whole
			long := func(i int) string { return fmt.Sprintf("%s%060d", "attacker-", i) }
			for i := range attackers {
				mustDecide(t, s, sluice.Request{Prefix: prefix, Key: long(i), Limits: flood, Cost: 1, Now: t0})
				if b := s.Bytes(); b > s.maxBytes {
					t.Fatalf("after %d attackers: Bytes = %d, over the cap %d", i+1, b, s.maxBytes)
				}
			}
			if n := s.Len(); n >= attackers/2 {
				t.Fatalf("Len() = %d: the flood evicted few, the test does not reach the cap", n)
			}
			apart := 0
			for _, tb := range s.shards[0].tables {
				apart += len(tb.long)
			}
			if apart == 0 {
				t.Fatal("no name kept apart: the flood's names are not the longest")
			}
			t.Logf("%d states held, %d names kept apart", s.Len(), apart)
			later := t0.Add(time.Minute)
			admitted := 0
			for i := range attackers {
				if d := mustDecide(t, s, sluice.Request{Prefix: prefix, Key: long(i), Limits: flood, Cost: 1, Now: later}); d.Allowed {
					admitted++
				}
			}
			if admitted != 0 {
				t.Errorf("%d of %d attackers over their limit admitted again within the hour, want 0", admitted, attackers)
			}
			for i := range innocents {
				d := mustDecide(t, s, sluice.Request{Prefix: "sluice:api:", Key: key(i), Limits: api, Cost: 1, Now: later})
				if !d.Allowed || d.Remaining < 8 {
					t.Errorf("innocent %s after the flood: allowed %v, Remaining %d; want allowed with 8 left", key(i), d.Allowed, d.Remaining)
				}
			}
		})
	}
}

// boundDecide is mustDecide through a Bound of r's prefix and limits (a
// new one each time: a Bound keeps no state of its own).
func boundDecide(t *testing.T, s *Store, r sluice.Request) sluice.Decision {
	t.Helper()
	b, err := s.Bind(s, r.Prefix, r.Limits)
	if err != nil {
		t.Fatal(err)
	}
	d, err := b.Decide(context.Background(), r.Key, sluice.OpTake, r.Cost, r.Now)
	if err != nil {
		t.Fatalf("Bound.Decide(%q) error: %v", r.Key, err)
	}
	return d
}

// TestCapTooLarge checks the one way a take can still fail for room: a
// request whose states alone need more than MaxBytes.
func TestCapTooLarge(t *testing.T) {
	s, _ := capStore(t)
	huge := []sluice.Limit{{Rate: 10_000, Period: time.Hour, Algorithm: sluice.SlidingLog}}
	_, err := s.Decide(context.Background(), sluice.Request{Key: "k", Limits: huge, Cost: 1, Now: t0})
	if !errors.Is(err, sluice.ErrStoreFull) || !errors.Is(err, sluice.ErrStore) {
		t.Fatalf("Decide(a log of 80 kB under MaxBytes %d) error = %v, want ErrStoreFull wrapping ErrStore", s.maxBytes, err)
	}
	if s.Len() != 0 || s.Bytes() != 0 {
		t.Errorf("after ErrStoreFull: Len, Bytes = %d, %d; want 0, 0", s.Len(), s.Bytes())
	}
}

// TestCapSparesRequestKey checks that making room never drops a state of
// the request being decided, even one back to empty: the take must count,
// even if that leaves the store over its cap until the next insert.
func TestCapSparesRequestKey(t *testing.T) {
	s, room := capStore(t)
	hourly := sluice.Limit{Rate: 2, Period: time.Hour}
	fixed := sluice.Limit{Rate: 2, Period: time.Hour, Algorithm: sluice.FixedWindow}
	mustDecide(t, s, sluice.Request{Key: "k000", Limits: []sluice.Limit{hourly}, Cost: 1, Now: t0})
	for i := 1; i < room; i++ {
		mustDecide(t, s, sluice.Request{Key: key(i), Limits: []sluice.Limit{hourly}, Cost: 2, Now: t0})
	}
	// Hours later k000's state is empty and the others are over their
	// limit again: making room for k000's fixed window may evict them,
	// never k000, back to empty as it is.
	later := t0.Add(3 * time.Hour)
	for i := 1; i < room; i++ {
		mustDecide(t, s, sluice.Request{Key: key(i), Limits: []sluice.Limit{hourly}, Cost: 2, Now: later})
	}
	mustDecide(t, s, sluice.Request{Key: "k000", Limits: []sluice.Limit{hourly, fixed}, Cost: 1, Now: later})
	for _, l := range []sluice.Limit{hourly, fixed} {
		if d := mustDecide(t, s, sluice.Request{Key: "k000", Limits: []sluice.Limit{l}, Op: sluice.OpPeek, Cost: 1, Now: later}); d.Remaining != 0 {
			t.Errorf("after a take of 1 of 2, peek(%v) Remaining = %d, want 0: the take was lost", l, d.Remaining)
		}
	}
	for i := 1; i < room; i++ {
		if d := mustDecide(t, s, sluice.Request{Key: key(i), Limits: []sluice.Limit{hourly}, Op: sluice.OpPeek, Cost: 1, Now: later}); d.Allowed {
			t.Errorf("%s, over its limit, allowed after the eviction", key(i))
		}
	}
}

// TestBytesCountsHeap checks what the store counts against MaxBytes
// against the heap it holds, measured after a collection, for every
// layout of state: one-word and larger states with keys in their slots
// and apart, and sliding logs. It must not count less than it holds
// (that memory would escape the cap), nor much more.
func TestBytesCountsHeap(t *testing.T) {
	const n = 20_000
	for _, c := range []struct {
		name   string
		limits []sluice.Limit
		prefix string
	}{
		{"gcra", []sluice.Limit{{Rate: 5, Period: time.Hour}}, "sluice:login:"},
		{"gcra long keys", []sluice.Limit{{Rate: 5, Period: time.Hour}}, "sluice:login:" + strings.Repeat("x", 60)},
		{"fixed", []sluice.Limit{{Rate: 5, Period: time.Hour, Algorithm: sluice.FixedWindow}}, "sluice:login:"},
		{"fixed long keys", []sluice.Limit{{Rate: 5, Period: time.Hour, Algorithm: sluice.FixedWindow}}, "sluice:login:" + strings.Repeat("x", 60)},
		{"sliding", []sluice.Limit{{Rate: 5, Period: time.Hour, Algorithm: sluice.SlidingWindow}}, "sluice:login:"},
		{"sliding long keys", []sluice.Limit{{Rate: 5, Period: time.Hour, Algorithm: sluice.SlidingWindow}}, "sluice:login:" + strings.Repeat("x", 60)},
		{"log", []sluice.Limit{{Rate: 5, Period: time.Hour, Algorithm: sluice.SlidingLog}}, "sluice:login:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&0xff, i&0xff)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			s := New(Config{SweepInterval: -1, MaxBytes: -1})
			for _, k := range keys {
				mustDecide(t, s, sluice.Request{Prefix: c.prefix, Key: k, Limits: c.limits, Cost: 1, Now: t0})
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			t.Logf("Bytes() = %d, heap %d: %.2f", s.Bytes(), heap, float64(s.Bytes())/float64(heap))
			if got := s.Bytes(); got < heap || got > heap*3/2 {
				t.Errorf("Bytes() = %d for %d states holding %d bytes of heap; want %d to %d", got, n, heap, heap, heap*3/2)
			}
			runtime.KeepAlive(keys)
			s.Close()
		})
	}
}
