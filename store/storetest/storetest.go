package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// t0 is where every trace starts: a real date, far from the zero that
// marks empty state. It lies on the suite's microsecond grid.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Limits of every algorithm, with emission intervals and sub-window widths
// that are whole microseconds (see the package doc).
var (
	gcra       = sluice.Limit{Rate: 10, Period: time.Second}
	gcraBurst  = sluice.Limit{Rate: 4, Period: time.Second, Burst: 7}
	gcraSlow   = sluice.Limit{Rate: 5, Period: time.Minute, Burst: 2}
	fixed      = sluice.Limit{Rate: 10, Period: time.Second, Algorithm: sluice.FixedWindow}
	staggered  = sluice.Limit{Rate: 10, Period: time.Second, Algorithm: sluice.FixedWindow, Staggered: true}
	sliding    = sluice.Limit{Rate: 10, Period: time.Second, Algorithm: sluice.SlidingWindow}
	sliding1   = sluice.Limit{Rate: 10, Period: time.Second, Algorithm: sluice.SlidingWindow, Buckets: 1}
	sliding4   = sluice.Limit{Rate: 7, Period: time.Second, Algorithm: sluice.SlidingWindow, Buckets: 4}
	approx     = sluice.Limit{Rate: 10, Period: time.Second, Algorithm: sluice.ApproxSlidingWindow}
	approx1    = sluice.Limit{Rate: 10, Period: time.Second, Algorithm: sluice.ApproxSlidingWindow, Buckets: 1}
	approx4    = sluice.Limit{Rate: 7, Period: time.Second, Algorithm: sluice.ApproxSlidingWindow, Buckets: 4}
	slidingLog = sluice.Limit{Rate: 10, Period: time.Second, Algorithm: sluice.SlidingLog}
	log1       = sluice.Limit{Rate: 1, Period: time.Second, Algorithm: sluice.SlidingLog}
)

// oneOfEach holds one limit of every algorithm, for the subtests that run
// once per algorithm.
var oneOfEach = []sluice.Limit{gcra, gcraBurst, fixed, staggered, sliding, approx4, slidingLog}

// Run runs the conformance suite against the stores newStore returns.
// newStore is called once per subtest, with that subtest's t; it must
// return a ready store and register whatever cleanup the store needs with
// t.Cleanup. See the package doc for what the suite requires.
func Run(t *testing.T, newStore func(t *testing.T) sluice.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s *suite)
	}{
		{"Differential", testDifferential},
		{"Burst", testBurst},
		{"Cost", testCost},
		{"Invalid", testInvalid},
		{"Peek", testPeek},
		{"Reset", testReset},
		{"Refund", testRefund},
		{"Insert", testInsert},
		{"Answers", testAnswers},
		{"Policy", testPolicy},
		{"Expiry", testExpiry},
		{"Keys", testKeys},
		{"SharedState", testSharedState},
		{"Concurrency", testConcurrency},
		{"CancelledContext", testCancelledContext},
		{"StoreClock", testStoreClock},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newSuite(t, newStore))
		})
	}
}

// A suite is one subtest's view of a store: a fresh store, a prefix no
// other run shares, and the reference state the store must agree with.
type suite struct {
	store  sluice.Store
	prefix string
	ref    reference
}

func newSuite(t *testing.T, newStore func(t *testing.T) sluice.Store) *suite {
	t.Helper()
	store := newStore(t)
	if store == nil {
		t.Fatal("newStore returned nil")
	}
	return &suite{store: store, prefix: newPrefix(t), ref: reference{states: map[stateKey][]int64{}}}
}

// sub returns a suite for a subtest of s's subtest: the same store, a
// prefix and a reference of its own.
func (s *suite) sub(t *testing.T) *suite {
	return &suite{store: s.store, prefix: newPrefix(t), ref: reference{states: map[stateKey][]int64{}}}
}

// newPrefix returns a random prefix: a shared server never needs
// flushing, and reruns never see an earlier run's state.
func newPrefix(t *testing.T) string {
	return "storetest:" + strconv.FormatUint(rand.Uint64(), 36) + ":" + t.Name() + ":"
}

// request returns r with the suite's prefix put in front of its own.
func (s *suite) request(r sluice.Request) sluice.Request {
	r.Prefix = s.prefix + r.Prefix
	return r
}

// do sends r (under the suite's prefix) to the store and applies it to the
// reference; it fails t unless the store's decision is the reference's.
// It returns the store's decision.
func (s *suite) do(t *testing.T, r sluice.Request) sluice.Decision {
	t.Helper()
	r = s.request(r)
	got, err := s.store.Decide(t.Context(), r)
	if err != nil {
		t.Fatalf("Decide(%s) error: %v", describe(r), err)
	}
	want := s.ref.apply(r)
	if diff := diffDecision(got, want); diff != "" {
		t.Fatalf("Decide(%s) = %s\nwant %s\n(%s)", describe(r), fmtDecision(got), fmtDecision(want), diff)
	}
	return got
}

// fails sends an invalid r to the store and fails t unless the store
// returns an error wrapping want. The reference does not apply it.
func (s *suite) fails(t *testing.T, r sluice.Request, want error) {
	t.Helper()
	r = s.request(r)
	_, err := s.store.Decide(t.Context(), r)
	if !errors.Is(err, want) {
		t.Errorf("Decide(%s) error = %v, want %v", describe(r), err, want)
	}
}

// take, peek, refund, insert and resetKey build the requests of the subtests.
func take(key string, now time.Time, cost int, limits ...sluice.Limit) sluice.Request {
	return sluice.Request{Key: key, Limits: limits, Op: sluice.OpTake, Cost: cost, Now: now}
}

func peek(key string, now time.Time, cost int, limits ...sluice.Limit) sluice.Request {
	return sluice.Request{Key: key, Limits: limits, Op: sluice.OpPeek, Cost: cost, Now: now}
}

func refund(key string, now, at time.Time, cost int, limits ...sluice.Limit) sluice.Request {
	return sluice.Request{Key: key, Limits: limits, Op: sluice.OpRefund, Cost: cost, Now: now, At: at}
}

func insert(key string, now time.Time, cost int, limits ...sluice.Limit) sluice.Request {
	return sluice.Request{Key: key, Limits: limits, Op: sluice.OpInsert, Cost: cost, Now: now}
}

func resetKey(key string, now time.Time, limits ...sluice.Limit) sluice.Request {
	return sluice.Request{Key: key, Limits: limits, Op: sluice.OpReset, Now: now}
}

// stateKey names one limit's state of one actor in the reference.
type stateKey struct {
	name string
	id   uint64
}

// reference is the model every store must agree with: package algorithm
// applied to states in a map, named as the Store contract names them.
type reference struct {
	states map[stateKey][]int64
}

// apply applies a valid request and returns the decision a store must
// return: for a refund, a peek of its cost just after it; for a reset or
// an insert, a peek of 1 just after it (see sluice.Store).
func (m *reference) apply(r sluice.Request) sluice.Decision {
	name := r.Prefix + r.Key
	now := r.Now.UnixNano()
	if r.Op == sluice.OpReset {
		fresh := make([][]int64, len(r.Limits))
		for i, l := range r.Limits {
			delete(m.states, stateKey{name, l.StateID()})
			fresh[i] = make([]int64, algorithm.Words(l))
		}
		d := algorithm.Decide(r.Limits, fresh, name, now, 1, sluice.OpPeek)
		d.Time = r.Now
		return d
	}
	states := make([][]int64, len(r.Limits))
	for i, l := range r.Limits {
		k := stateKey{name, l.StateID()}
		st := algorithm.Fit(l, m.states[k])
		if len(st) != algorithm.Words(l) {
			st = make([]int64, algorithm.Words(l))
		}
		m.states[k] = st
		states[i] = st
	}
	op, cost := r.Op, r.Cost
	switch op {
	case sluice.OpRefund:
		algorithm.RefundAll(r.Limits, states, name, r.At.UnixNano(), now, r.Cost)
		op = sluice.OpPeek
	case sluice.OpInsert:
		algorithm.InsertAll(r.Limits, states, name, now, r.Cost)
		op, cost = sluice.OpPeek, 1
	}
	d := algorithm.Decide(r.Limits, states, name, now, cost, op)
	d.Time = r.Now
	return d
}

// diffDecision names the fields in which got differs from want, or
// returns "" when they agree.
func diffDecision(got, want sluice.Decision) string {
	var diffs []string
	if got.Allowed != want.Allowed {
		diffs = append(diffs, "Allowed")
	}
	if got.Limit != want.Limit {
		diffs = append(diffs, "Limit")
	}
	if got.Remaining != want.Remaining {
		diffs = append(diffs, "Remaining")
	}
	if got.ResetAfter != want.ResetAfter {
		diffs = append(diffs, "ResetAfter")
	}
	if got.RetryAfter != want.RetryAfter {
		diffs = append(diffs, "RetryAfter")
	}
	if !got.Time.Equal(want.Time) {
		diffs = append(diffs, "Time")
	}
	if len(diffs) == 0 {
		return ""
	}
	return "differs in " + strings.Join(diffs, ", ")
}

func fmtDecision(d sluice.Decision) string {
	return fmt.Sprintf("{Allowed:%v Limit:%v Remaining:%d ResetAfter:%v RetryAfter:%v Time:%s}",
		d.Allowed, d.Limit, d.Remaining, d.ResetAfter, d.RetryAfter, fmtTime(d.Time))
}

// fmtTime writes t relative to t0, which reads better than dates.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "zero"
	}
	return "t0" + fmt.Sprintf("%+v", t.Sub(t0))
}

// describe writes a request briefly, with long keys shortened.
func describe(r sluice.Request) string {
	key := r.Key
	if len(key) > 40 {
		key = fmt.Sprintf("%.40s…(%d bytes)", key, len(key))
	}
	limits := make([]string, len(r.Limits))
	for i, l := range r.Limits {
		limits[i] = l.String()
	}
	s := fmt.Sprintf("%v key %q cost %d now %s limits [%s]", r.Op, key, r.Cost, fmtTime(r.Now), strings.Join(limits, ", "))
	if !r.At.IsZero() {
		s += " at " + fmtTime(r.At)
	}
	return s
}

// cancelled returns a context that is already cancelled.
func cancelled(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}
