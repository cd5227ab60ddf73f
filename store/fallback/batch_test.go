package fallback

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// batchFake is a fakeStore that can batch: each DecideBatch is counted
// once, and decides its requests one by one as the fakeStore would.
type batchFake struct {
	*fakeStore
	batches atomic.Int64
	sizes   []int
}

func (b *batchFake) DecideBatch(ctx context.Context, rs []sluice.Request) ([]sluice.Decision, []error) {
	b.batches.Add(1)
	b.sizes = append(b.sizes, len(rs))
	ds, errs := make([]sluice.Decision, len(rs)), make([]error, len(rs))
	for i, r := range rs {
		ds[i], errs[i] = b.Decide(ctx, r)
	}
	return ds, errs
}

// batchRequests is a batch of takes and peeks for three actors under a
// limit of 2: some allowed, some denied, at one instant.
func batchRequests() []sluice.Request {
	limit := []sluice.Limit{{Rate: 2, Period: time.Second}}
	var rs []sluice.Request
	for i, key := range []string{"a", "b", "a", "a", "c", "b", "a"} {
		op := sluice.OpTake
		if i == 5 {
			op = sluice.OpPeek
		}
		rs = append(rs, sluice.Request{Key: key, Limits: limit, Op: op, Cost: 1, Now: t0})
	}
	return rs
}

// TestDecideBatchAsDecide checks that DecideBatch answers what Decide
// answers for each request in turn, whatever the primary does, with one
// call of the primary's DecideBatch for the whole batch.
func TestDecideBatchAsDecide(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  sluice.FailurePolicy
		failing bool
	}{
		{"working", sluice.FailLocal, false},
		{"failing/local", sluice.FailLocal, true},
		{"failing/open", sluice.FailOpen, true},
		{"failing/closed", sluice.FailClosed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mk := func() (*Store, *batchFake) {
				primary := &batchFake{fakeStore: newFake(t)}
				if tc.failing {
					primary.set(failing)
				}
				return newStore(t, Config{Primary: primary, Policy: tc.policy, Threshold: 3, Instances: 2, Clock: func() time.Time { return t0 }}), primary
			}
			one, _ := mk()
			batch, primary := mk()
			rs := batchRequests()
			ds, errs := batch.DecideBatch(context.Background(), rs)
			for i, r := range rs {
				want, werr := one.Decide(context.Background(), r)
				if ds[i] != want || !errors.Is(errs[i], werr) {
					t.Errorf("DecideBatch[%d] (%v %s) = %+v, %v; want Decide's %+v, %v", i, r.Op, r.Key, ds[i], errs[i], want, werr)
				}
			}
			if got := primary.batches.Load(); got != 1 {
				t.Errorf("primary DecideBatch calls = %d, want 1", got)
			}
			if primary.calls.Load() != int64(len(rs)) {
				t.Errorf("primary decided %d requests, want the %d of the batch", primary.calls.Load(), len(rs))
			}
			// The requests of a batch reach the primary together: the
			// deny cache and the breaker act from the next batch on,
			// where one by one they act from the next request.
			want := one.Stats()
			want.DenyHits = 0
			if tc.failing {
				want.Errors = int64(len(rs))
			}
			if got := batch.Stats(); got != want {
				t.Errorf("Stats after DecideBatch = %+v, want %+v (Decide's: %+v)", got, want, one.Stats())
			}
			if batch.Open() != tc.failing || one.Open() != tc.failing {
				t.Errorf("breaker open = %v (batch), %v (one by one), want %v", batch.Open(), one.Open(), tc.failing)
			}
		})
	}
}

// TestDecideBatchDenyCacheAndBreaker checks the parts of the policy a
// batch shares with Decide: actors the deny cache knows are answered
// without the primary, invalid requests get their own errors, an open
// breaker keeps the whole batch from the primary, and local takes are
// replayed once it is back.
func TestDecideBatchDenyCacheAndBreaker(t *testing.T) {
	var now atomic.Int64
	now.Store(t0.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	primary := &batchFake{fakeStore: newFakeClock(t, clock)}
	s := newStore(t, Config{Primary: primary, Policy: sluice.FailLocal, Threshold: 1, Cooldown: time.Second, Clock: clock})
	limit := []sluice.Limit{{Rate: 1, Period: time.Minute}}
	take := func(key string) sluice.Request {
		return sluice.Request{Key: key, Limits: limit, Cost: 1}
	}
	ctx := context.Background()

	// "a" is denied by the primary, then known to the deny cache.
	s.DecideBatch(ctx, []sluice.Request{take("a"), take("a")})
	primary.sizes = nil
	ds, errs := s.DecideBatch(ctx, []sluice.Request{take("a"), take("b"), {Key: "bad", Cost: 1}})
	if ds[0].Allowed || errs[0] != nil || !ds[1].Allowed || errs[1] != nil || !errors.Is(errs[2], sluice.ErrInvalidRequest) {
		t.Fatalf("DecideBatch(a denied, b, invalid) = %+v, %v; want a denied, b allowed, ErrInvalidRequest", ds, errs)
	}
	if fmt.Sprint(primary.sizes) != "[1]" || s.Stats().DenyHits != 1 {
		t.Errorf("primary batches %v, DenyHits %d; want one batch of b alone, one hit", primary.sizes, s.Stats().DenyHits)
	}

	// The primary fails: the breaker opens, and the next batch is
	// decided locally without calling it.
	primary.set(failing)
	s.DecideBatch(ctx, []sluice.Request{take("c"), take("d")})
	if !s.Open() {
		t.Fatal("breaker closed after a failed batch, want open")
	}
	calls := primary.calls.Load()
	ds, _ = s.DecideBatch(ctx, []sluice.Request{take("e"), take("e")})
	if primary.calls.Load() != calls || !ds[0].Allowed || ds[1].Allowed {
		t.Errorf("batch while open: %d primary calls, decisions %+v; want none, local allow then deny", primary.calls.Load()-calls, ds)
	}

	// Back: the next batch after the cooldown probes, closes the
	// breaker, and the local takes (c, d, e) are replayed.
	primary.set(nil)
	now.Add(int64(time.Second))
	ds, errs = s.DecideBatch(ctx, []sluice.Request{take("f"), take("g")})
	if !ds[0].Allowed || !ds[1].Allowed || errs[0] != nil || errs[1] != nil || s.Open() {
		t.Fatalf("probe batch = %+v, %v, Open %v; want both allowed, breaker closed", ds, errs, s.Open())
	}
	s.replayWG.Wait()
	if st := s.Stats(); st.Replayed != 3 {
		t.Errorf("Stats = %+v, want the 3 local takes replayed", st)
	}
}
