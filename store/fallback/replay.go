package fallback

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// A journal keeps the takes a Store allowed locally, oldest first, up to
// max; beyond it the oldest are dropped.
type journal struct {
	mu      sync.Mutex
	max     int
	takes   []sluice.Request
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

// drain returns the journal's takes and empties it.
func (j *journal) drain() []sluice.Request {
	j.mu.Lock()
	defer j.mu.Unlock()
	t := j.takes
	j.takes = nil
	return t
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
		takes := s.journal.drain()
		for len(takes) > 0 {
			select {
			case <-s.done:
				return
			default:
			}
			n := min(len(takes), replayBatch)
			s.replay(takes[:n])
			takes = takes[n:]
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
