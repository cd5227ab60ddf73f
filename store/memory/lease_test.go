package memory

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestLeaseConformance(t *testing.T) {
	storetest.RunLeases(t, func(t *testing.T) sluice.LeaseStore {
		s := New(Config{})
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestLeaseRefConformance(t *testing.T) {
	storetest.RunLeaseRefs(t, func(t *testing.T, clock func() time.Time) sluice.LeaseRefs {
		s := New(Config{Clock: clock})
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestLeaseRefSwept: a table swept once its leases expired takes its refs
// with it (they refer to nothing, and a late release counts nothing
// twice), and the leases' bytes come back to zero.
func TestLeaseRefSwept(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New(Config{SweepInterval: -1, Clock: func() time.Time { return now }})
	defer s.Close()
	ref, g := s.AcquireRef("p:", "k", 2, 0, time.Second)
	if !g.Allowed() || !s.NameRef(ref, "named") || s.LeaseBytes() <= 0 {
		t.Fatalf("AcquireRef = %+v, LeaseBytes %d; want granted, named, counted", g, s.LeaseBytes())
	}
	now = now.Add(time.Minute)
	for i := range 3 * leaseShardCount * (sweepMinCalls + 64) { // enough calls on other keys to sweep every shard at least twice
		s.Release(t.Context(), sluice.LeaseRequest{Prefix: "p:", Key: strconv.Itoa(i), ID: "x", Limit: 1})
	}
	if b := s.LeaseBytes(); b != 0 {
		t.Fatalf("LeaseBytes after every lease expired and was swept = %d, want 0", b)
	}
	if s.ReleaseRef(ref) || s.NameRef(ref, "again") {
		t.Fatal("a ref to a swept table still refers to a lease")
	}
	if _, ok := s.ExtendRef(ref, time.Second); ok {
		t.Fatal("ExtendRef of a ref to a swept table = true")
	}
	if b := s.LeaseBytes(); b != 0 {
		t.Fatalf("LeaseBytes after late calls on a swept ref = %d, want 0", b)
	}
}

// TestLeaseFlood fills the leases' share of a small store with a flood of
// keys: it is never exceeded, a full store refuses new leases (Full)
// rather than forget live ones, and room comes back as leases expire.
func TestLeaseFlood(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New(Config{MaxBytes: 64 << 10, SweepInterval: -1, Clock: func() time.Time { return now }})
	defer s.Close()
	budget := int64(64<<10) / leaseShare
	req := func(key, id string) sluice.LeaseRequest {
		return sluice.LeaseRequest{Prefix: "p:", Key: key, ID: id, Limit: 2, TTL: time.Minute}
	}
	granted, full := 0, 0
	for i := range 10000 {
		d, err := s.Acquire(t.Context(), req(strconv.Itoa(i), "id"))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case d.Allowed:
			granted++
		case d.Full:
			full++
		default:
			t.Fatalf("key %d: refused but not full: %+v", i, d)
		}
		if b := s.LeaseBytes(); b > budget {
			t.Fatalf("after %d keys: LeaseBytes %d over the leases' share %d", i, b, budget)
		}
	}
	if granted == 0 || full == 0 {
		t.Fatalf("granted %d, full %d: want both", granted, full)
	}
	// Every live lease is still counted: key 0 holds one of 2, and a
	// second holder takes the other place only if room allows.
	if d, _ := s.Acquire(t.Context(), req("0", "id")); !d.Allowed || d.InUse != 1 {
		t.Errorf("renewal of a live lease in a full store = %+v, want granted, 1 in use", d)
	}
	if d, _ := s.Acquire(t.Context(), req(strings.Repeat("k", 1<<20), "id")); d.Allowed || !d.Full {
		t.Errorf("a megabyte key = %+v, want refused as full", d)
	}
	now = now.Add(2 * time.Minute) // every lease expired: a full store sweeps before it refuses
	// A key of 400 bytes does not fit in what room a flood of short keys
	// leaves, unless the expired leases are swept.
	if d, _ := s.Acquire(t.Context(), req(strings.Repeat("n", 400), "id")); !d.Allowed {
		t.Errorf("acquire after expiry = %+v, want granted", d)
	}
	if b, want := s.LeaseBytes(), tableBytes(len("p:")+400)+int64(len("id")); b != want {
		t.Errorf("after every lease expired: LeaseBytes %d, want only the new lease's, %d", b, want)
	}
}

// TestLeaseBytes: what a table counts, with its name kept inside it or
// not and its places beyond the first, by ref and by ID; and that a
// sweep gives it all back.
func TestLeaseBytes(t *testing.T) {
	tests := []struct {
		key   string
		byRef int // leases by ref, then
		ids   []string
	}{
		{"k", 1, nil},
		{"k", 3, nil},
		{"k", 0, []string{"a", "bb"}},
		{strings.Repeat("k", leaseNameInline), 2, []string{"ccc"}},
	}
	for _, tt := range tests {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		s := New(Config{SweepInterval: -1, Clock: func() time.Time { return now }})
		want := tableBytes(len("p:") + len(tt.key))
		for i := range tt.byRef + len(tt.ids) {
			if i > 0 {
				want += leaseSlotBytes
			}
			if i < tt.byRef {
				if _, g := s.AcquireRef("p:", tt.key, 8, 0, time.Second); !g.Allowed() {
					t.Fatalf("AcquireRef %d = %+v, want granted", i, g)
				}
				continue
			}
			id := tt.ids[i-tt.byRef]
			want += int64(len(id))
			if d, err := s.Acquire(t.Context(), sluice.LeaseRequest{Prefix: "p:", Key: tt.key, ID: id, Limit: 8, TTL: time.Second}); err != nil || !d.Allowed {
				t.Fatalf("Acquire %q = %+v, %v; want granted", id, d, err)
			}
		}
		if got := s.LeaseBytes(); got != want {
			t.Errorf("%d-byte key, %d by ref, IDs %q: LeaseBytes = %d, want %d", len(tt.key), tt.byRef, tt.ids, got, want)
		}
		now = now.Add(time.Minute)
		for i := range 3 * leaseShardCount * (sweepMinCalls + 64) { // sweeps every shard
			s.Release(t.Context(), sluice.LeaseRequest{Prefix: "q:", Key: strconv.Itoa(i), ID: "x", Limit: 1})
		}
		if got := s.LeaseBytes(); got != 0 {
			t.Errorf("%d-byte key, %d by ref, IDs %q: LeaseBytes after the sweep = %d, want 0", len(tt.key), tt.byRef, tt.ids, got)
		}
		s.Close()
	}
}

// TestLeaseRetryAfterExact: a denial's RetryAfter is until the earliest
// live lease expires, exactly, after the lease that expired first was
// released, extended or renewed, and after several expire together.
func TestLeaseRetryAfterExact(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		op   string // "acquire", "release" or "extend"
		id   string
		at   time.Duration
		want time.Duration // RetryAfter of an acquire denied right after (the table is full), 0 for none
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"release the earliest", []step{
			{"acquire", "a", 0, 0}, {"acquire", "b", time.Second, 0}, {"acquire", "c", 2 * time.Second, 8 * time.Second},
			{"release", "a", 3 * time.Second, 0}, {"acquire", "d", 3 * time.Second, 8 * time.Second},
			{"release", "b", 4 * time.Second, 0}, {"acquire", "e", 4 * time.Second, 8 * time.Second},
		}},
		{"extend the earliest", []step{
			{"acquire", "a", 0, 0}, {"acquire", "b", time.Second, 0}, {"acquire", "c", 2 * time.Second, 8 * time.Second},
			{"extend", "a", 3 * time.Second, 8 * time.Second}, {"extend", "b", 4 * time.Second, 8 * time.Second},
			{"extend", "c", 5 * time.Second, 8 * time.Second},
		}},
		{"renew the earliest", []step{
			{"acquire", "a", 0, 0}, {"acquire", "b", time.Second, 0}, {"acquire", "c", 2 * time.Second, 8 * time.Second},
			{"acquire", "a", 3 * time.Second, 8 * time.Second},
		}},
		{"two expire together", []step{
			{"acquire", "a", 0, 0}, {"acquire", "b", 0, 0}, {"acquire", "c", 2 * time.Second, 8 * time.Second},
			{"release", "a", 3 * time.Second, 0}, {"acquire", "d", 3 * time.Second, 7 * time.Second},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0
			s := New(Config{SweepInterval: -1, Clock: func() time.Time { return now }})
			defer s.Close()
			req := func(id string) sluice.LeaseRequest {
				return sluice.LeaseRequest{Prefix: "p:", Key: "k", ID: id, Limit: 3, TTL: 10 * time.Second}
			}
			for _, st := range tt.steps {
				now = t0.Add(st.at)
				var err error
				switch st.op {
				case "acquire":
					_, err = s.Acquire(t.Context(), req(st.id))
				case "release":
					_, err = s.Release(t.Context(), req(st.id))
				case "extend":
					_, err = s.Extend(t.Context(), req(st.id))
				}
				if err != nil {
					t.Fatal(err)
				}
				if st.want == 0 {
					continue
				}
				for range 2 { // the second from what the first found
					if d, _ := s.Acquire(t.Context(), req("x")); d.Allowed || d.RetryAfter != st.want {
						t.Fatalf("after %s %s at %v: denial %+v, want RetryAfter %v", st.op, st.id, st.at, d, st.want)
					}
				}
			}
		})
	}
}
