package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/internal/testing/leasetest"
)

// RunLeases runs the conformance suite of sluice.LeaseStore against the
// stores newStore returns, called once per subtest as Run's is. Times are
// whole microseconds, as the Redis store keeps them; each subtest uses a
// prefix of its own.
func RunLeases(t *testing.T, newStore func(t *testing.T) sluice.LeaseStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, ls *leaseSuite)
	}{
		{"Ceiling", testLeaseCeiling},
		{"Renew", testLeaseRenew},
		{"Release", testLeaseRelease},
		{"Expiry", testLeaseExpiry},
		{"Extend", testLeaseExtend},
		{"Invalid", testLeaseInvalid},
		{"Keys", testLeaseKeys},
		{"Forged", testLeaseForged},
		{"Differential", testLeaseDifferential},
		{"Concurrency", testLeaseConcurrency},
		{"StoreClock", testLeaseStoreClock},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			if s == nil {
				t.Fatal("newStore returned nil")
			}
			tt.fn(t, &leaseSuite{store: s, prefix: newPrefix(t)})
		})
	}
}

type leaseSuite struct {
	store  sluice.LeaseStore
	prefix string
}

// leaseOp is one call of a trace: acquire, release or extend of lease id
// on key at t0+at, with a TTL and ceiling.
type leaseOp struct {
	op      string
	key, id string
	at, ttl time.Duration
	limit   int
	ceiling int
}

func (o leaseOp) String() string {
	return fmt.Sprintf("%s(key %q, id %q, at %v, ttl %v, limit %d, ceiling %d)", o.op, o.key, o.id, o.at, o.ttl, o.limit, o.ceiling)
}

func (ls *leaseSuite) call(t *testing.T, o leaseOp) (sluice.LeaseDecision, error) {
	t.Helper()
	if o.limit == 0 {
		o.limit = 3
	}
	r := sluice.LeaseRequest{Prefix: ls.prefix, Key: o.key, ID: o.id, Limit: o.limit, Ceiling: o.ceiling, TTL: o.ttl, Now: t0.Add(o.at)}
	switch o.op {
	case "acquire":
		return ls.store.Acquire(t.Context(), r)
	case "release":
		return ls.store.Release(t.Context(), r)
	case "extend":
		return ls.store.Extend(t.Context(), r)
	}
	t.Fatalf("unknown op %q", o.op)
	return sluice.LeaseDecision{}, nil
}

// want runs o and fails t unless the answer has allowed and inUse.
func (ls *leaseSuite) want(t *testing.T, o leaseOp, allowed bool, inUse int) sluice.LeaseDecision {
	t.Helper()
	d, err := ls.call(t, o)
	if err != nil {
		t.Fatalf("%v error: %v", o, err)
	}
	if d.Allowed != allowed || d.InUse != inUse {
		t.Fatalf("%v = allowed %v, in use %d; want %v, %d", o, d.Allowed, d.InUse, allowed, inUse)
	}
	if !d.Time.Equal(t0.Add(o.at)) {
		t.Errorf("%v: Time = %v, want the request's %v", o, d.Time, t0.Add(o.at))
	}
	return d
}

func acq(key, id string, at, ttl time.Duration) leaseOp {
	return leaseOp{op: "acquire", key: key, id: id, at: at, ttl: ttl}
}

func rel(key, id string, at time.Duration) leaseOp {
	return leaseOp{op: "release", key: key, id: id, at: at}
}

func ext(key, id string, at, ttl time.Duration) leaseOp {
	return leaseOp{op: "extend", key: key, id: id, at: at, ttl: ttl}
}

// testLeaseCeiling: a limit of 3 grants 3 and refuses the 4th, with a
// RetryAfter to the earliest expiry; a lower ceiling refuses sooner.
func testLeaseCeiling(t *testing.T, ls *leaseSuite) {
	ls.want(t, acq("k", "a", 0, 10*time.Second), true, 1)
	ls.want(t, acq("k", "b", time.Second, 10*time.Second), true, 2)
	low := acq("k", "c", 2*time.Second, 10*time.Second)
	low.ceiling = 2
	if d := ls.want(t, low, false, 2); d.RetryAfter != 8*time.Second {
		t.Errorf("%v: RetryAfter = %v, want 8s (until lease a expires)", low, d.RetryAfter)
	}
	d := ls.want(t, acq("k", "c", 2*time.Second, 10*time.Second), true, 3)
	if want := t0.Add(12 * time.Second); !d.Expires.Equal(want) {
		t.Errorf("Expires = %v, want %v", d.Expires, want)
	}
	d = ls.want(t, acq("k", "d", 3*time.Second, 10*time.Second), false, 3)
	if d.RetryAfter != 7*time.Second || d.Full || !d.Expires.IsZero() || d.Limit != 3 {
		t.Errorf("denied acquire = %+v, want RetryAfter 7s, not Full, no Expires, Limit 3", d)
	}
}

// testLeaseRenew: acquiring a live ID again renews it without taking a
// second place, even at the ceiling, and never shortens it.
func testLeaseRenew(t *testing.T, ls *leaseSuite) {
	ls.want(t, acq("k", "a", 0, 10*time.Second), true, 1)
	ls.want(t, acq("k", "b", 0, 10*time.Second), true, 2)
	ls.want(t, acq("k", "c", 0, 10*time.Second), true, 3)
	d := ls.want(t, acq("k", "a", time.Second, 20*time.Second), true, 3)
	if want := t0.Add(21 * time.Second); !d.Expires.Equal(want) {
		t.Errorf("renewed Expires = %v, want %v", d.Expires, want)
	}
	d = ls.want(t, acq("k", "a", 2*time.Second, time.Second), true, 3)
	if want := t0.Add(21 * time.Second); !d.Expires.Equal(want) {
		t.Errorf("renewal to an earlier time: Expires = %v, want %v kept", d.Expires, want)
	}
	ls.want(t, acq("k", "d", 15*time.Second, time.Second), true, 2) // b and c expired at 10s
}

// testLeaseRelease: a release frees the place at once; releasing again,
// or an unknown ID, reports false and changes nothing.
func testLeaseRelease(t *testing.T, ls *leaseSuite) {
	ls.want(t, acq("k", "a", 0, time.Minute), true, 1)
	ls.want(t, acq("k", "b", 0, time.Minute), true, 2)
	ls.want(t, acq("k", "c", 0, time.Minute), true, 3)
	ls.want(t, acq("k", "d", time.Second, time.Minute), false, 3)
	ls.want(t, rel("k", "b", 2*time.Second), true, 2)
	ls.want(t, rel("k", "b", 2*time.Second), false, 2)
	ls.want(t, rel("k", "zz", 2*time.Second), false, 2)
	ls.want(t, acq("k", "d", 3*time.Second, time.Minute), true, 3)
	ls.want(t, rel("other", "a", 3*time.Second), false, 0)
}

// testLeaseExpiry: a lease counts until its expiry and not at it: a
// holder that never releases gives its place back when the lease ends.
func testLeaseExpiry(t *testing.T, ls *leaseSuite) {
	ls.want(t, acq("k", "a", 0, 5*time.Second), true, 1)
	ls.want(t, acq("k", "b", time.Second, 5*time.Second), true, 2)
	ls.want(t, acq("k", "c", time.Second, 5*time.Second), true, 3)
	ls.want(t, acq("k", "d", 5*time.Second-time.Microsecond, time.Second), false, 3)
	ls.want(t, acq("k", "d", 5*time.Second, time.Second), true, 3) // a expired at 5s
	ls.want(t, rel("k", "a", 5*time.Second), false, 3)
	ls.want(t, acq("k", "e", 6*time.Second, time.Second), true, 1) // b, c and d expired at 6s
	ls.want(t, acq("k", "f", 7*time.Second-time.Microsecond, time.Second), true, 2)
	ls.want(t, acq("k", "g", 7*time.Second, time.Second), true, 2) // e expired
}

// testLeaseExtend: a live lease extended outlives its first TTL; an
// expired or released one is not revived.
func testLeaseExtend(t *testing.T, ls *leaseSuite) {
	ls.want(t, acq("k", "a", 0, 5*time.Second), true, 1)
	d := ls.want(t, ext("k", "a", 4*time.Second, 5*time.Second), true, 1)
	if want := t0.Add(9 * time.Second); !d.Expires.Equal(want) {
		t.Errorf("extended Expires = %v, want %v", d.Expires, want)
	}
	ls.want(t, acq("k", "b", 8*time.Second, time.Second), true, 2) // a still live
	ls.want(t, ext("k", "b", 9*time.Second, time.Second), false, 0)
	ls.want(t, acq("k", "c", 9*time.Second, time.Second), true, 1)
	ls.want(t, rel("k", "c", 9*time.Second), true, 0)
	ls.want(t, ext("k", "c", 9*time.Second, time.Second), false, 0)
}

// testLeaseInvalid: malformed requests are errors wrapping
// ErrInvalidRequest, and change nothing.
func testLeaseInvalid(t *testing.T, ls *leaseSuite) {
	for _, o := range []leaseOp{
		{op: "acquire", key: "k", id: "", ttl: time.Second},
		{op: "acquire", key: "k", id: strings.Repeat("i", sluice.MaxLeaseIDLen+1), ttl: time.Second},
		{op: "acquire", key: "k", id: "a", ttl: 0},
		{op: "acquire", key: "k", id: "a", ttl: sluice.MaxLeaseTTL + time.Second},
		{op: "acquire", key: "k", id: "a", ttl: time.Second, limit: -1},
		{op: "acquire", key: "k", id: "a", ttl: time.Second, limit: sluice.MaxLeases + 1},
		{op: "acquire", key: "k", id: "a", ttl: time.Second, limit: 2, ceiling: 3},
		{op: "extend", key: "k", id: "a", ttl: -time.Second},
		{op: "release", key: "k", id: ""},
	} {
		if _, err := ls.call(t, o); !errors.Is(err, sluice.ErrInvalidRequest) {
			t.Errorf("%v error = %v, want ErrInvalidRequest", o, err)
		}
	}
	ls.want(t, acq("k", "a", 0, time.Second), true, 1)
}

// testLeaseKeys: keys of any bytes and length hold separate tables, and
// IDs of any bytes are kept apart.
func testLeaseKeys(t *testing.T, ls *leaseSuite) {
	keys := []string{"", "\x00", "a", "a\x00", "{a}", "a:b", strings.Repeat("x", 300), strings.Repeat("x", 301)}
	for _, k := range keys {
		ls.want(t, acq(k, "\x00id", 0, time.Minute), true, 1)
	}
	for _, k := range keys {
		ls.want(t, acq(k, "\x00ie", 0, time.Minute), true, 2)
		ls.want(t, acq(k, strings.Repeat("\xff", sluice.MaxLeaseIDLen), 0, time.Minute), true, 3)
		ls.want(t, acq(k, "x", 0, time.Minute), false, 3)
	}
}

// testLeaseForged: a lease is released and extended by its own ID in its
// own table, and by nothing else. While one lease of an ID as
// Concurrency draws them is held beside others, every forgery of its ID
// (its neighbours, random IDs of every length and alphabet), tried on
// its key, releases and extends nothing (an ID of invalid length is
// ErrInvalidRequest); its own ID tried on another key or another prefix
// (another rule) finds nothing; released, the ID replayed releases and
// extends nothing, and an ID granted on another key or prefix does not
// release the lease of the same ID there.
func testLeaseForged(t *testing.T, ls *leaseSuite) {
	const id = "q3Jc9vW1xZt0LmN8bY4aKg" // 128 bits in base64url
	others := []string{"q3Jc9vW1xZt0LmN8bY4aKf", "q3Jc9vW1xZt0LmN8bY4aKh"}
	for i, o := range append([]string{id}, others...) {
		ls.want(t, leaseOp{op: "acquire", key: "k", id: o, ttl: time.Minute, limit: 8}, true, i+1)
	}
	forged := 0
	for _, f := range leasetest.Forgeries(id) {
		if slices.Contains(others, f) {
			continue // held by their own holders
		}
		for _, op := range []string{"release", "extend"} {
			o := leaseOp{op: op, key: "k", id: f, at: time.Second, ttl: time.Minute, limit: 8}
			d, err := ls.call(t, o)
			valid := len(f) > 0 && len(f) <= sluice.MaxLeaseIDLen
			switch {
			case !valid && !errors.Is(err, sluice.ErrInvalidRequest):
				t.Fatalf("%v error = %v, want ErrInvalidRequest", o, err)
			case valid && (err != nil || d.Allowed || d.InUse != 3):
				t.Fatalf("%v = %+v, %v; want nothing released or extended, 3 in use", o, d, err)
			}
			forged++
		}
	}
	other := leaseSuite{store: ls.store, prefix: ls.prefix + "other:"}
	ls.want(t, rel("k2", id, time.Second), false, 0)
	ls.want(t, ext("k2", id, time.Second, time.Minute), false, 0)
	other.want(t, rel("k", id, time.Second), false, 0)
	other.want(t, ext("k", id, time.Second, time.Minute), false, 0)
	if d := ls.want(t, ext("k", id, 2*time.Second, time.Minute), true, 3); !d.Expires.Equal(t0.Add(62 * time.Second)) {
		t.Errorf("extend by the holder after %d forgeries: Expires = %v, want %v", forged, d.Expires, t0.Add(62*time.Second))
	}
	ls.want(t, rel("k", id, 3*time.Second), true, 2)
	ls.want(t, rel("k", id, 3*time.Second), false, 2)
	ls.want(t, ext("k", id, 3*time.Second, time.Minute), false, 2)
	other.want(t, acq("k", id, 4*time.Second, time.Minute), true, 1)
	ls.want(t, acq("k2", id, 4*time.Second, time.Minute), true, 1)
	ls.want(t, rel("k", id, 5*time.Second), false, 2)
	other.want(t, rel("k", id, 5*time.Second), true, 0)
	ls.want(t, rel("k2", id, 5*time.Second), true, 0)
	ls.want(t, rel("k", others[0], 6*time.Second), true, 1)
	ls.want(t, rel("k", others[1], 6*time.Second), true, 0)
}

// testLeaseDifferential replays random traces through the store and
// through algorithm.LeaseTable, which must agree on every answer.
func testLeaseDifferential(t *testing.T, ls *leaseSuite) {
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	ref := map[string]*algorithm.LeaseTable{}
	var at time.Duration
	for i := range 400 {
		at += time.Duration(rng.IntN(400)) * time.Millisecond
		o := leaseOp{op: []string{"acquire", "acquire", "release", "extend"}[rng.IntN(4)],
			key: fmt.Sprint("k", rng.IntN(3)), id: fmt.Sprint("id", rng.IntN(8)),
			at: at, ttl: time.Duration(1+rng.IntN(3000)) * time.Millisecond, limit: 4, ceiling: 1 + rng.IntN(4)}
		tab := ref[o.key]
		if tab == nil {
			tab = &algorithm.LeaseTable{}
			ref[o.key] = tab
		}
		now, exp := t0.Add(at).UnixNano(), t0.Add(at+o.ttl).UnixNano()
		var want bool
		switch o.op {
		case "acquire":
			want = tab.Acquire(o.id, o.ceiling, now, exp)
		case "release":
			want = tab.Release(o.id, now)
		case "extend":
			want = tab.Extend(o.id, now, exp)
		}
		d := ls.want(t, o, want, len(tab.Leases))
		if d.Allowed && o.op != "release" && !d.Expires.Equal(time.Unix(0, tab.Expires(o.id))) {
			t.Fatalf("step %d %v: Expires = %v, want %v", i, o, d.Expires, time.Unix(0, tab.Expires(o.id)))
		}
	}
}

// testLeaseConcurrency: 64 goroutines acquiring on one key at one instant
// get exactly the limit granted; releasing them all empties the table.
func testLeaseConcurrency(t *testing.T, ls *leaseSuite) {
	const n, limit = 64, 5
	var granted atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			o := acq("hot", fmt.Sprint("g", i), 0, time.Minute)
			o.limit = limit
			d, err := ls.call(t, o)
			if err != nil {
				t.Error(err)
				return
			}
			if d.Allowed {
				granted.Add(1)
			}
			if d.InUse > limit {
				t.Errorf("InUse = %d, over the limit %d", d.InUse, limit)
			}
		})
	}
	wg.Wait()
	if got := granted.Load(); got != limit {
		t.Fatalf("%d concurrent acquires granted %d, want exactly %d", n, got, limit)
	}
}

// testLeaseStoreClock: with no Now the store's own clock applies, and
// expiries follow it.
func testLeaseStoreClock(t *testing.T, ls *leaseSuite) {
	r := sluice.LeaseRequest{Prefix: ls.prefix, Key: "k", ID: "a", Limit: 1, TTL: time.Minute}
	d, err := ls.store.Acquire(t.Context(), r)
	if err != nil || !d.Allowed {
		t.Fatalf("Acquire on the store's clock = %+v, %v", d, err)
	}
	if d.Time.IsZero() || d.Expires.Sub(d.Time) != time.Minute {
		t.Errorf("Acquire: Time %v, Expires %v: want Expires a minute after Time", d.Time, d.Expires)
	}
	r.ID = "b"
	if d, err := ls.store.Acquire(t.Context(), r); err != nil || d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > time.Minute {
		t.Errorf("second Acquire = %+v, %v; want denied, RetryAfter within a minute", d, err)
	}
	r.ID = "a"
	if d, err := ls.store.Release(t.Context(), r); err != nil || !d.Allowed || d.InUse != 0 {
		t.Errorf("Release = %+v, %v; want released, none in use", d, err)
	}
}
