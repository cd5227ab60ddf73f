package fallback

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// A journal keeps the takes a Store allowed locally, oldest first, up to
// max; beyond it the oldest are dropped. The replay moves them out a
// batch at a time (next, then sent), so that a refund can tell a take
// still waiting (cancel it) from one in the batch on its way to the
// primary (wait for it, then refund the primary).
type journal struct {
	mu      sync.Mutex
	max     int
	takes   []sluice.Request
	sending []sluice.Request // the batch being replayed
	done    chan struct{}    // closed when sending has been replayed
	dropped atomic.Int64
}

func (j *journal) add(r sluice.Request) {
	if j.max == 0 {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.takes) >= j.max {
		n := len(j.takes) - j.max + 1
		j.dropped.Add(int64(n))
		j.takes = append(j.takes[:0], j.takes[n:]...)
	}
	j.takes = append(j.takes, r)
}

// next moves up to n of the oldest takes into the batch being replayed
// and returns it, or nil when the journal is empty. The caller calls
// sent once it has replayed them.
func (j *journal) next(n int) []sluice.Request {
	j.mu.Lock()
	defer j.mu.Unlock()
	n = min(n, len(j.takes))
	if n == 0 {
		return nil
	}
	// The batch keeps the front of the array; later adds and cancels
	// write only behind it.
	j.sending, j.takes = j.takes[:n:n], j.takes[n:]
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
	if i := refunded(j.takes, r); i >= 0 {
		j.takes = slices.Delete(j.takes, i, i+1)
		j.mu.Unlock()
		return true, nil
	}
	var done chan struct{}
	if refunded(j.sending, r) >= 0 {
		done = j.done
	}
	j.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return false, nil
}

// refunded returns the index of the newest take in takes that refund r
// gives back (same name, policy and cost, taken at r.At), or -1.
func refunded(takes []sluice.Request, r *sluice.Request) int {
	for i := len(takes) - 1; i >= 0; i-- {
		t := &takes[i]
		if t.Now.Equal(r.At) && t.Cost == r.Cost && t.Key == r.Key && t.Prefix == r.Prefix && slices.Equal(t.Limits, r.Limits) {
			return i
		}
	}
	return -1
}

// batcher is the optional capability of a primary to decide many
// requests in one round trip, as store/redis has.
type batcher interface {
	DecideBatch(ctx context.Context, rs []sluice.Request) ([]sluice.Decision, []error)
}

// replayBatch is how many takes one replay round trip carries.
const replayBatch = 256

// startReplay replays the journal into the primary in the background,
// unless a replay is already running: each take is sent again at its
// original time, so the primary's state counts what this process allowed
// while the primary was away (takes the primary now denies are counted
// as replayed: its state was already at the limit).
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
			takes := s.journal.next(replayBatch)
			if takes == nil {
				return
			}
			s.replay(takes)
			s.journal.sent()
		}
	}()
}

func (s *Store) replay(takes []sluice.Request) {
	timeout := s.c.Timeout
	if timeout <= 0 {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout*replayBatch/16)
	defer cancel()
	if b, ok := s.c.Primary.(batcher); ok {
		_, errs := b.DecideBatch(ctx, takes)
		for _, err := range errs {
			s.count(err)
		}
		return
	}
	for _, r := range takes {
		_, err := s.c.Primary.Decide(ctx, r)
		s.count(err)
	}
}

func (s *Store) count(err error) {
	if err != nil {
		s.replayFailed.Add(1)
		if s.c.OnError != nil {
			s.c.OnError(err)
		}
		return
	}
	s.replayed.Add(1)
}
