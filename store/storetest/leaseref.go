package storetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testing/leasetest"
)

// RunLeaseRefs runs the conformance suite of sluice.LeaseRefs against the
// stores newStore returns, one per subtest, each reading the clock it is
// given (which starts at t0 and only the test moves). Leases granted by
// ref and by ID share a key's places.
func RunLeaseRefs(t *testing.T, newStore func(t *testing.T, clock func() time.Time) sluice.LeaseRefs) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, rs *refSuite)
	}{
		{"SharePlaces", testRefSharePlaces},
		{"Grant", testRefGrant},
		{"Release", testRefRelease},
		{"StaleRef", testRefStale},
		{"Extend", testRefExtend},
		{"Name", testRefName},
		{"NameForged", testRefNameForged},
		{"Concurrency", testRefConcurrency},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := &refSuite{prefix: newPrefix(t)}
			rs.now.Store(t0.UnixNano())
			rs.store = newStore(t, func() time.Time { return time.Unix(0, rs.now.Load()) })
			if rs.store == nil {
				t.Fatal("newStore returned nil")
			}
			tt.fn(t, rs)
		})
	}
}

type refSuite struct {
	store  sluice.LeaseRefs
	prefix string
	now    atomic.Int64
}

func (rs *refSuite) advance(d time.Duration) { rs.now.Add(int64(d)) }

// refTTL is the TTL of the suite's leases.
const refTTL = 10 * time.Second

func (rs *refSuite) request(key, id string, limit int) sluice.LeaseRequest {
	return sluice.LeaseRequest{Prefix: rs.prefix, Key: key, ID: id, Limit: limit, TTL: refTTL}
}

// acquire acquires by ref on key, and fails t unless the decision is want.
func (rs *refSuite) acquire(t *testing.T, key string, limit int, want bool) sluice.LeaseRef {
	t.Helper()
	ref, g := rs.store.AcquireRef(rs.prefix, key, limit, 0, refTTL)
	if g.Allowed() != want || (ref.Table != nil) != want {
		t.Fatalf("AcquireRef(%q) = %+v, %+v; want allowed %v, a ref if so", key, ref, g, want)
	}
	return ref
}

func testRefSharePlaces(t *testing.T, rs *refSuite) {
	a := rs.acquire(t, "k", 3, true)
	rs.acquire(t, "k", 3, true)
	d, err := rs.store.Acquire(t.Context(), rs.request("k", "id1", 3))
	if err != nil || !d.Allowed || d.InUse != 3 {
		t.Fatalf("Acquire by ID beside two refs = %+v, %v; want granted, 3 in use", d, err)
	}
	rs.acquire(t, "k", 3, false)
	if d, _ := rs.store.Acquire(t.Context(), rs.request("k", "id2", 3)); d.Allowed || d.RetryAfter != 10*time.Second {
		t.Fatalf("Acquire by ID at the limit = %+v, want denied, retry after 10s", d)
	}
	if !rs.store.ReleaseRef(a) {
		t.Fatal("ReleaseRef of a live lease = false")
	}
	if d, _ := rs.store.Acquire(t.Context(), rs.request("k", "id2", 3)); !d.Allowed || d.InUse != 3 {
		t.Fatalf("Acquire by ID after a ref's release = %+v, want granted, 3 in use", d)
	}
	// A ceiling counts both kinds.
	rs.acquire(t, "k2", 4, true)
	rs.store.Acquire(t.Context(), rs.request("k2", "x", 4))
	if _, g := rs.store.AcquireRef(rs.prefix, "k2", 4, 2, refTTL); g.Allowed() {
		t.Fatalf("AcquireRef at its ceiling = %+v, want denied", g)
	}
}

// testRefGrant: AcquireRef's answer, granted and denied, as a
// LeaseDecision; and requests that Validate refuses are denials.
func testRefGrant(t *testing.T, rs *refSuite) {
	ref, g := rs.store.AcquireRef(rs.prefix, "k", 1, 0, refTTL)
	want := sluice.LeaseDecision{Allowed: true, InUse: 1, Limit: 1, Expires: t0.Add(refTTL), Time: t0}
	if d := g.Decision(1); !g.Allowed() || ref.Table == nil || !sameDecision(d, want) {
		t.Fatalf("AcquireRef = %+v, as a decision %+v; want a ref and %+v", g, d, want)
	}
	rs.advance(4 * time.Second)
	ref, g = rs.store.AcquireRef(rs.prefix, "k", 1, 0, refTTL)
	want = sluice.LeaseDecision{InUse: 1, Limit: 1, RetryAfter: 6 * time.Second, Time: t0.Add(4 * time.Second)}
	if d := g.Decision(1); g.Allowed() || ref.Table != nil || !sameDecision(d, want) {
		t.Fatalf("AcquireRef at the limit = %+v, as a decision %+v; want no ref and %+v", g, d, want)
	}
	for _, bad := range []struct {
		limit, ceiling int
		ttl            time.Duration
	}{
		{0, 0, refTTL}, {sluice.MaxLeases + 1, 0, refTTL}, {2, 3, refTTL}, {2, -1, refTTL},
		{2, 0, 0}, {2, 0, sluice.MaxLeaseTTL + 1},
	} {
		if ref, g := rs.store.AcquireRef(rs.prefix, "bad", bad.limit, bad.ceiling, bad.ttl); g.Allowed() || ref.Table != nil {
			t.Errorf("AcquireRef(limit %d, ceiling %d, ttl %v) = %+v, %+v; want denied", bad.limit, bad.ceiling, bad.ttl, ref, g)
		}
	}
}

// sameDecision compares decisions, their times by Equal.
func sameDecision(a, b sluice.LeaseDecision) bool {
	return a.Allowed == b.Allowed && a.InUse == b.InUse && a.Limit == b.Limit && a.Expires.Equal(b.Expires) &&
		a.RetryAfter == b.RetryAfter && a.Full == b.Full && a.Time.Equal(b.Time)
}

func testRefRelease(t *testing.T, rs *refSuite) {
	ref := rs.acquire(t, "k", 1, true)
	rs.acquire(t, "k", 1, false)
	if !rs.store.ReleaseRef(ref) {
		t.Fatal("first ReleaseRef = false, want true")
	}
	if rs.store.ReleaseRef(ref) {
		t.Fatal("second ReleaseRef = true, want false")
	}
	if rs.store.ReleaseRef(sluice.LeaseRef{}) {
		t.Fatal("ReleaseRef of the zero ref = true")
	}
	ref = rs.acquire(t, "k", 1, true)
	rs.advance(10 * time.Second) // expired exactly
	if rs.store.ReleaseRef(ref) {
		t.Fatal("ReleaseRef of an expired lease = true, want false")
	}
	rs.acquire(t, "k", 1, true)
}

// testRefStale: a ref whose lease expired, its place granted since to
// another holder, refers to nothing: releasing or extending it leaves the
// new holder's lease alone.
func testRefStale(t *testing.T, rs *refSuite) {
	old := rs.acquire(t, "k", 1, true)
	rs.advance(11 * time.Second)
	cur := rs.acquire(t, "k", 1, true)
	if rs.store.ReleaseRef(old) {
		t.Fatal("ReleaseRef of a stale ref = true")
	}
	if _, ok := rs.store.ExtendRef(old, time.Minute); ok {
		t.Fatal("ExtendRef of a stale ref = true")
	}
	if rs.store.NameRef(old, "stale") {
		t.Fatal("NameRef of a stale ref = true")
	}
	rs.acquire(t, "k", 1, false) // cur still holds the place
	if !rs.store.ReleaseRef(cur) {
		t.Fatal("ReleaseRef of the current holder = false")
	}
}

func testRefExtend(t *testing.T, rs *refSuite) {
	ref := rs.acquire(t, "k", 1, true)
	rs.advance(9 * time.Second)
	exp, ok := rs.store.ExtendRef(ref, 10*time.Second)
	if want := t0.Add(19 * time.Second); !ok || !exp.Equal(want) {
		t.Fatalf("ExtendRef = %v, %v; want %v, true", exp, ok, want)
	}
	rs.advance(9 * time.Second) // past the first expiry, before the new one
	rs.acquire(t, "k", 1, false)
	if _, ok := rs.store.ExtendRef(ref, 0); ok {
		t.Fatal("ExtendRef with a TTL of 0 = true")
	}
	rs.advance(time.Second) // expired at 19s
	if _, ok := rs.store.ExtendRef(ref, 10*time.Second); ok {
		t.Fatal("ExtendRef of an expired lease = true: it must not be revived")
	}
	rs.acquire(t, "k", 1, true)
}

// testRefName: a named lease is found by its ID, as any lease by ID is,
// and still by its ref.
func testRefName(t *testing.T, rs *refSuite) {
	ref := rs.acquire(t, "k", 2, true)
	if !rs.store.NameRef(ref, "lease-1") {
		t.Fatal("NameRef of a live lease = false")
	}
	if rs.store.NameRef(ref, "") {
		t.Fatal("NameRef with an empty ID = true")
	}
	d, err := rs.store.Extend(t.Context(), rs.request("k", "lease-1", 2))
	if err != nil || !d.Allowed {
		t.Fatalf("Extend by the given ID = %+v, %v; want allowed", d, err)
	}
	// Acquiring the ID again renews it: no second place.
	if d, _ := rs.store.Acquire(t.Context(), rs.request("k", "lease-1", 2)); !d.Allowed || d.InUse != 1 {
		t.Fatalf("Acquire of the given ID = %+v, want renewed, 1 in use", d)
	}
	if d, _ := rs.store.Release(t.Context(), rs.request("k", "lease-1", 2)); !d.Allowed || d.InUse != 0 {
		t.Fatalf("Release by the given ID = %+v, want live, 0 in use", d)
	}
	if rs.store.ReleaseRef(ref) {
		t.Fatal("ReleaseRef after its release by ID = true")
	}
}

// testRefNameForged: beside a lease named by NameRef and one known only
// by its ref (whose ID is empty), no forgery of the name, and no empty
// ID, releases or extends either.
func testRefNameForged(t *testing.T, rs *refSuite) {
	const id = "q3Jc9vW1xZt0LmN8bY4aKg"
	named, unnamed := rs.acquire(t, "k", 4, true), rs.acquire(t, "k", 4, true)
	if !rs.store.NameRef(named, id) {
		t.Fatal("NameRef of a live lease = false")
	}
	for _, f := range leasetest.Forgeries(id) {
		r := rs.request("k", f, 4)
		d, err := rs.store.Release(t.Context(), r)
		if d.Allowed || err != nil && !errors.Is(err, sluice.ErrInvalidRequest) || err == nil && d.InUse != 2 {
			t.Fatalf("Release of %q = %+v, %v; want nothing released, 2 in use", f, d, err)
		}
		if d, err = rs.store.Extend(t.Context(), r); d.Allowed || err != nil && !errors.Is(err, sluice.ErrInvalidRequest) {
			t.Fatalf("Extend of %q = %+v, %v; want nothing extended", f, d, err)
		}
	}
	if !rs.store.ReleaseRef(unnamed) {
		t.Fatal("ReleaseRef of the unnamed lease after the forgeries = false")
	}
	if d, err := rs.store.Release(t.Context(), rs.request("k", id, 4)); err != nil || !d.Allowed || d.InUse != 0 {
		t.Fatalf("Release by the name = %+v, %v; want released, 0 in use", d, err)
	}
}

// testRefConcurrency: 32 goroutines acquiring and releasing by ref, and 8
// by ID, on one key of limit 4: counted by the holders themselves, never
// more than 4 hold a place at once, and all are free at the end.
func testRefConcurrency(t *testing.T, rs *refSuite) {
	const limit = 4
	var holding, most atomic.Int64
	hold := func() {
		n := holding.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		holding.Add(-1)
	}
	var wg sync.WaitGroup
	for g := range 40 {
		wg.Go(func() {
			for i := range 300 {
				if g < 32 {
					if ref, g := rs.store.AcquireRef(rs.prefix, "k", limit, 0, refTTL); g.Allowed() {
						hold()
						rs.store.ReleaseRef(ref)
					}
					continue
				}
				r := rs.request("k", string(rune('a'+g))+string(rune('a'+i%26)), limit)
				if d, err := rs.store.Acquire(t.Context(), r); err == nil && d.Allowed {
					hold()
					rs.store.Release(t.Context(), r)
				}
			}
		})
	}
	wg.Wait()
	if most.Load() > limit || most.Load() == 0 {
		t.Fatalf("at most %d held at once, want 1 to %d", most.Load(), limit)
	}
	if _, g := rs.store.AcquireRef(rs.prefix, "k", limit, 0, refTTL); !g.Allowed() || g.InUse != 1 {
		t.Fatalf("after every release: %+v, want granted, 1 in use", g)
	}
}
