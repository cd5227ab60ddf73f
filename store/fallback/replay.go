package fallback

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// A journal keeps what a Store decided locally and the primary must
// learn when it answers again, oldest first, up to max; beyond it the
// oldest are dropped. It holds the takes allowed locally, the resets, and
// the refunds of takes the primary counted. The replay moves them out a
// batch at a time (next, then sent), so that a refund or a reset can tell
// an operation still waiting (cancel or drop it) from one in the batch on
// its way to the primary (wait for it).
type journal struct {
	mu      sync.Mutex
	max     int
	ops     []sluice.Request
	sending []sluice.Request // the batch being replayed
	done    chan struct{}    // closed when sending has been replayed
	waiting atomic.Int64     // len(ops), read without mu
	dropped atomic.Int64
}

// add journals r, a take, reset or refund decided locally.
func (j *journal) add(r sluice.Request) {
	if j.max == 0 {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.ops) >= j.max {
		n := len(j.ops) - j.max + 1
		j.dropped.Add(int64(n))
		j.ops = append(j.ops[:0], j.ops[n:]...)
	}
	j.ops = append(j.ops, r)
	j.waiting.Store(int64(len(j.ops)))
}

// next moves up to n of the oldest operations into the batch being
// replayed and returns it, or nil when the journal is empty. The caller
// calls sent once it has replayed them.
func (j *journal) next(n int) []sluice.Request {
	j.mu.Lock()
	defer j.mu.Unlock()
	n = min(n, len(j.ops))
	if n == 0 {
		return nil
	}
	// The batch keeps the front of the array; later adds, cancels and
	// wipes write only behind it.
	j.sending, j.ops = j.ops[:n:n], j.ops[n:]
	j.waiting.Store(int64(len(j.ops)))
	j.done = make(chan struct{})
	return j.sending
}

// sent ends the batch of next.
func (j *journal) sent() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.sending = nil
	close(j.done)
}

// cancel removes the take that refund r gives back, and reports whether
// it was still waiting to be replayed: the primary has never counted it.
// When that take is in the batch being replayed, cancel waits until the
// batch has been sent, or ctx ends, and reports false: the primary now
// counts it, so the refund is the primary's.
func (j *journal) cancel(ctx context.Context, r *sluice.Request) (bool, error) {
	j.mu.Lock()
	if i := refunded(j.ops, r); i >= 0 {
		j.ops = slices.Delete(j.ops, i, i+1)
		j.waiting.Store(int64(len(j.ops)))
		j.mu.Unlock()
		return true, nil
	}
	var done chan struct{}
	if refunded(j.sending, r) >= 0 {
		done = j.done
	}
	j.mu.Unlock()
	return false, wait(ctx, done)
}

// wipe applies reset r to the journal: the operations of r's actor that
// wait to be replayed lose the limits r resets, and those left with none
// are dropped, since the reset forgets what they did. When the batch
// being replayed holds an operation that r resets, wipe waits until the
// batch has been sent, or ctx ends, so that r reaches the primary after
// it.
func (j *journal) wipe(ctx context.Context, r *sluice.Request) error {
	reset := resetBy(r)
	j.mu.Lock()
	kept := j.ops[:0]
	for _, o := range j.ops {
		if sameActor(&o, r) && slices.ContainsFunc(o.Limits, reset) {
			// A copy: o.Limits may be a caller's slice.
			if o.Limits = slices.DeleteFunc(slices.Clone(o.Limits), reset); len(o.Limits) == 0 {
				continue
			}
		}
		kept = append(kept, o)
	}
	clear(j.ops[len(kept):])
	j.ops = kept
	j.waiting.Store(int64(len(j.ops)))
	var done chan struct{}
	for i := range j.sending {
		if o := &j.sending[i]; sameActor(o, r) && slices.ContainsFunc(o.Limits, reset) {
			done = j.done
			break
		}
	}
	j.mu.Unlock()
	return wait(ctx, done)
}

// wait waits until done is closed, if it is not nil, or ctx ends.
func wait(ctx context.Context, done <-chan struct{}) error {
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// refunded returns the index of the newest take in ops that refund r
// gives back (same actor, policy and cost, taken at r.At), or -1.
func refunded(ops []sluice.Request, r *sluice.Request) int {
	for i := len(ops) - 1; i >= 0; i-- {
		o := &ops[i]
		if o.Op == sluice.OpTake && o.Now.Equal(r.At) && o.Cost == r.Cost && sameActor(o, r) && slices.Equal(o.Limits, r.Limits) {
			return i
		}
	}
	return -1
}

func sameActor(a, b *sluice.Request) bool { return a.Key == b.Key && a.Prefix == b.Prefix }

// resetBy reports whether reset r forgets the state of a limit: whether
// one of its limits has the same StateID.
func resetBy(r *sluice.Request) func(sluice.Limit) bool {
	return func(l sluice.Limit) bool {
		id := l.StateID()
		return slices.ContainsFunc(r.Limits, func(rl sluice.Limit) bool { return rl.StateID() == id })
	}
}

// replayBatch is how many operations one replay round trip carries.
const replayBatch = 256

// startReplay replays the journal into the primary in the background,
// unless a replay is already running: each operation is sent again at
// its original time, so the primary's state counts what this process
// allowed while the primary was away, forgets what it reset and gets
// back what it refunded (takes the primary now denies are counted as
// replayed: its state was already at the limit).
func (s *Store) startReplay() {
	if s.journal.max == 0 || !s.replaying.CompareAndSwap(false, true) {
		return
	}
	s.replayWG.Add(1)
	go func() {
		defer s.replayWG.Done()
		defer s.replaying.Store(false)
		for {
			select {
			case <-s.done:
				return
			default:
			}
			ops := s.journal.next(replayBatch)
			if ops == nil {
				return
			}
			s.replay(ops)
			s.journal.sent()
		}
	}()
}

func (s *Store) replay(ops []sluice.Request) {
	timeout := s.c.Timeout
	if timeout <= 0 {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout*replayBatch/16)
	defer cancel()
	_, errs := sluice.DecideBatch(ctx, s.c.Primary, ops)
	for i, err := range errs {
		s.count(ops[i].Op, err)
	}
}

// count counts the replay of an operation.
func (s *Store) count(op sluice.Op, err error) {
	switch {
	case err != nil:
		s.replayFailed.Add(1)
		if s.c.OnError != nil {
			s.c.OnError(err)
		}
	case op == sluice.OpReset:
		s.replayedResets.Add(1)
	case op == sluice.OpRefund:
		s.replayedRefunds.Add(1)
	default: // takes and inserts
		s.replayed.Add(1)
	}
}
