package storetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// A BatchStore is a store that decides many requests in one call: a
// sluice.Batcher.
type BatchStore = sluice.Batcher

// RunBatch runs the conformance suite against the batches of the stores
// newStore returns: every request of Run decided inside a batch, between
// peeks of its own key, then random batches of takes, peeks, refunds,
// resets and invalid requests over several keys, some named more than
// once in a batch, whose every answer must be the reference's with the
// requests applied one after another.
func RunBatch(t *testing.T, newStore func(t *testing.T) BatchStore) {
	t.Helper()
	t.Run("Suite", func(t *testing.T) {
		Run(t, func(t *testing.T) sluice.Store { return batched{newStore(t)} })
	})
	t.Run("Batches", func(t *testing.T) {
		s := newSuite(t, func(t *testing.T) sluice.Store { return newStore(t) })
		for i, limits := range policies {
			t.Run(policyName(limits), func(t *testing.T) {
				runBatches(t, s.sub(t), rand.New(rand.NewPCG(uint64(i), 0xba7c)), limits)
			})
		}
	})
}

// batched decides each request in a batch of three: the request between
// two peeks of cost 1 of its key, so that a store that batches by key
// decides it with others.
type batched struct{ BatchStore }

func (b batched) Decide(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
	p := r
	p.Op, p.Cost, p.At = sluice.OpPeek, 1, time.Time{}
	ds, errs := b.DecideBatch(ctx, []sluice.Request{p, r, p})
	if len(ds) != 3 || len(errs) != 3 {
		return sluice.Decision{}, errors.New("storetest: DecideBatch of 3 requests did not answer 3")
	}
	return ds[1], errs[1]
}

// batchKeys are the keys of runBatches: enough for a batch to name some
// twice and, on a Redis Cluster, to span several nodes.
var batchKeys = []string{"a", "b", "c", "d", "e", "f", "g", "h"}

// runBatches sends random batches of one to forty requests and checks
// each answer against the reference, applied in the batch's order.
func runBatches(t *testing.T, s *suite, rng *rand.Rand, limits []sluice.Limit) {
	t.Helper()
	var takes []taken
	burst, interval := limits[0].MaxBurst(), limits[0].Period/time.Duration(limits[0].Rate)
	for _, l := range limits {
		burst = min(burst, l.MaxBurst())
		interval = min(interval, l.Period/time.Duration(l.Rate))
	}
	now := t0.Add(13 * time.Hour)
	for range 20 {
		rs := make([]sluice.Request, 1+rng.IntN(40))
		var refunded []int // indexes in takes of this batch's refunds
		for i := range rs {
			now = now.Add(micros(rng, interval))
			key := batchKeys[rng.IntN(len(batchKeys))]
			cost := 1 + rng.IntN(min(burst, 3))
			switch x := rng.IntN(100); {
			case x < 3:
				rs[i] = take(key, now, burst+1, limits...) // invalid
			case x < 15 && len(takes) > len(refunded):
				j := len(takes) - 1 - len(refunded)
				tk := takes[j]
				refunded = append(refunded, j)
				rs[i] = refund(tk.key, now, tk.at, tk.cost, limits...)
			case x < 18:
				rs[i] = resetKey(key, now, limits...)
			case x < 35:
				rs[i] = peek(key, now, cost, limits...)
			default:
				rs[i] = take(key, now, cost, limits...)
			}
			rs[i] = s.request(rs[i])
		}
		takes = takes[:len(takes)-len(refunded)]
		ds, errs := s.store.(BatchStore).DecideBatch(t.Context(), rs)
		if len(ds) != len(rs) || len(errs) != len(rs) {
			t.Fatalf("DecideBatch(%d requests) = %d decisions, %d errors", len(rs), len(ds), len(errs))
		}
		for i, r := range rs {
			if r.Op != sluice.OpReset && r.Cost > burst {
				if !errors.Is(errs[i], sluice.ErrCostExceedsBurst) {
					t.Fatalf("DecideBatch[%d] (%s) error = %v, want %v", i, describe(r), errs[i], sluice.ErrCostExceedsBurst)
				}
				continue
			}
			if errs[i] != nil {
				t.Fatalf("DecideBatch[%d] (%s) error: %v", i, describe(r), errs[i])
			}
			want := s.ref.apply(r)
			if diff := diffDecision(ds[i], want); diff != "" {
				t.Fatalf("DecideBatch[%d] (%s) = %s\nwant %s\n(%s)", i, describe(r), fmtDecision(ds[i]), fmtDecision(want), diff)
			}
			if r.Op == sluice.OpTake && ds[i].Allowed {
				takes = append(takes, taken{r.Key, ds[i].Time, r.Cost})
			}
		}
	}
}
