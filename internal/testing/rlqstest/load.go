package rlqstest

import (
	"context"
	"slices"
	"sync"
	"time"
)

// A Demand returns the requests a second client i offers at time t
// since the load began.
type Demand func(i int, t time.Duration) float64

// A Record is what a load offered and admitted: the times of every
// request and of every admitted one, per client, since Start.
type Record struct {
	Start             time.Time
	Offered, Admitted [][]time.Duration
}

// Drive offers each client the demand of its index in bucket id, evenly
// spaced, for d (or until ctx ends), and records what they admit.
func Drive(ctx context.Context, clients []*Client, id map[string]string, demand Demand, d time.Duration) *Record {
	r := &Record{Start: time.Now(), Offered: make([][]time.Duration, len(clients)), Admitted: make([][]time.Duration, len(clients))}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			next := time.Duration(0)
			for ctx.Err() == nil {
				now := time.Since(r.Start)
				rate := demand(i, now)
				if rate <= 0 {
					next = now + 10*time.Millisecond
					sleepUntil(ctx, r.Start.Add(next))
					continue
				}
				if next < now-50*time.Millisecond { // behind: do not burst to catch up
					next = now
				}
				next += time.Duration(float64(time.Second) / rate)
				sleepUntil(ctx, r.Start.Add(next))
				if ctx.Err() != nil {
					return
				}
				at := time.Since(r.Start)
				r.Offered[i] = append(r.Offered[i], at)
				if c.Allow(id) {
					r.Admitted[i] = append(r.Admitted[i], at)
				}
			}
		})
	}
	wg.Wait()
	return r
}

func sleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}

// MaxWindow returns the most requests the whole fleet admitted in any
// window of length w within [from, to), and where that window starts.
func (r *Record) MaxWindow(w, from, to time.Duration) (int, time.Duration) {
	var all []time.Duration
	for _, a := range r.Admitted {
		for _, t := range a {
			if t >= from && t < to {
				all = append(all, t)
			}
		}
	}
	slices.Sort(all)
	best, at := 0, from
	for i, j := 0, 0; j < len(all); j++ {
		for all[j]-all[i] >= w {
			i++
		}
		if n := j - i + 1; n > best {
			best, at = n, all[i]
		}
	}
	return best, at
}

// Rate returns the requests a second client i admitted within [from, to).
func (r *Record) Rate(i int, from, to time.Duration) float64 {
	return rate(r.Admitted[i], from, to)
}

// OfferedRate returns the requests a second offered to client i within
// [from, to): less than its demand when the load generator fell behind
// (a machine too busy to run it on time).
func (r *Record) OfferedRate(i int, from, to time.Duration) float64 {
	return rate(r.Offered[i], from, to)
}

func rate(ts []time.Duration, from, to time.Duration) float64 {
	n := 0
	for _, t := range ts {
		if t >= from && t < to {
			n++
		}
	}
	return float64(n) / (to - from).Seconds()
}

// FairShares returns the max-min fair division of limit among demands:
// each gets its demand if it fits, the rest an equal part of what is
// left.
func FairShares(demands []float64, limit float64) []float64 {
	idx := make([]int, len(demands))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case demands[a] < demands[b]:
			return -1
		case demands[a] > demands[b]:
			return 1
		}
		return 0
	})
	out := make([]float64, len(demands))
	left := limit
	for k, i := range idx {
		fair := left / float64(len(idx)-k)
		out[i] = min(demands[i], fair)
		left -= out[i]
	}
	return out
}
