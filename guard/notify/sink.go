package notify

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of SinkConfig.
const (
	// DefaultQueue is how many events a Sink holds waiting when its
	// Queue is zero.
	DefaultQueue = 1000
	// DefaultAttempts is how many times a Sink tries to deliver an event
	// when its Attempts is zero.
	DefaultAttempts = 5
	// DefaultTimeout bounds one attempt when Timeout is zero.
	DefaultTimeout = 5 * time.Second
	// DefaultMinBackoff and DefaultMaxBackoff bound the wait before a
	// retry when MinBackoff and MaxBackoff are zero.
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
)

// Reasons of a dropped event, as Observer.Dropped reports them.
const (
	// DropQueueFull: the queue was full; the event was never tried.
	DropQueueFull = "queue_full"
	// DropAttempts: every attempt failed.
	DropAttempts = "attempts"
	// DropClosed: the Sink closed before it could deliver the event.
	DropClosed = "closed"
)

// A Deliverer makes one attempt to deliver an event: a Webhook, an
// Exec. An error wrapped by Permanent is not retried.
type Deliverer interface {
	Deliver(ctx context.Context, e Event) error
}

// permanent marks an error no retry can mend.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent wraps err so that a Sink does not retry the attempt that
// returned it (a receiver that refuses the event: 400, 401, 404).
func Permanent(err error) error { return permanent{err} }

// An Observer counts what becomes of a Sink's events, for metrics. Its
// methods must be fast and safe for concurrent use.
type Observer interface {
	// Sent counts an event delivered.
	Sent(sink string)
	// Failed counts an attempt that failed (it may be retried).
	Failed(sink string)
	// Dropped counts an event given up, with why: DropQueueFull,
	// DropAttempts or DropClosed.
	Dropped(sink, reason string)
}

// SinkConfig configures a Sink. The zero value of each field means its
// default.
type SinkConfig struct {
	// Name names the sink in metrics and logs. Default "sink".
	Name string
	// Queue bounds the events waiting for delivery: beyond it, Notify
	// drops them. Default DefaultQueue.
	Queue int
	// Workers is how many events are delivered at once. Default 1.
	Workers int
	// Attempts bounds the attempts per event. Default DefaultAttempts.
	Attempts int
	// Timeout bounds each attempt. Default DefaultTimeout.
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before each retry: a
	// random time up to MinBackoff·2^(retry-1), at most MaxBackoff ("full
	// jitter"), so that a fleet's retries do not fall in step. Defaults
	// DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Observer counts outcomes. Default none.
	Observer Observer
	// Logger receives a line for each event given up. Default none.
	Logger *slog.Logger
}

// A Sink delivers events through a Deliverer from a bounded queue, on
// goroutines of its own: Notify never blocks, whatever the receiver
// does. An event is tried up to Attempts times, each bounded by Timeout,
// with backoff and jitter in between; a full queue drops the event. Both
// are counted (Stats, Observer).
//
// Create Sinks with NewSink and stop them with Close. A Sink is safe
// for concurrent use.
type Sink struct {
	d      Deliverer
	c      SinkConfig
	q      chan Event
	mu     sync.RWMutex // closed against Notify's send
	closed bool
	drain  chan struct{} // closed by Close: workers stop when the queue is empty
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	sent, failed, full, gaveUp, closedDrops atomic.Int64
}

// SinkStats are a Sink's counts.
type SinkStats struct {
	// Sent counts events delivered; Failed attempts that failed.
	Sent, Failed int64
	// QueueFull, Attempts and Closed count events dropped, by reason.
	QueueFull, Attempts, Closed int64
	// Queued is how many events wait; Cap the most that may.
	Queued, Cap int
}

// NewSink returns a Sink delivering through d, and starts its workers.
func NewSink(d Deliverer, c SinkConfig) *Sink {
	c.Name = or(c.Name, "sink")
	c.Queue = or(c.Queue, DefaultQueue)
	c.Workers = or(c.Workers, 1)
	c.Attempts = or(c.Attempts, DefaultAttempts)
	c.Timeout = or(c.Timeout, DefaultTimeout)
	c.MinBackoff = or(c.MinBackoff, DefaultMinBackoff)
	c.MaxBackoff = max(or(c.MaxBackoff, DefaultMaxBackoff), c.MinBackoff)
	s := &Sink{d: d, c: c, q: make(chan Event, c.Queue), drain: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for range c.Workers {
		s.wg.Add(1)
		go s.work()
	}
	return s
}

func or[T int | time.Duration | string](v, def T) T {
	var zero T
	if v <= zero {
		return def
	}
	return v
}

// Name returns the sink's name.
func (s *Sink) Name() string { return s.c.Name }

// Notify queues e for delivery and reports whether it was queued: when
// the queue is full, or the Sink closed, e is dropped and counted. It
// never blocks.
func (s *Sink) Notify(e Event) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.drop(e, DropClosed, nil)
		return false
	}
	select {
	case s.q <- e:
		return true
	default:
		s.drop(e, DropQueueFull, nil)
		return false
	}
}

// Stats returns the sink's counts.
func (s *Sink) Stats() SinkStats {
	return SinkStats{Sent: s.sent.Load(), Failed: s.failed.Load(), QueueFull: s.full.Load(),
		Attempts: s.gaveUp.Load(), Closed: s.closedDrops.Load(), Queued: len(s.q), Cap: cap(s.q)}
}

// Close stops taking events and delivers those queued until ctx is
// done; then it stops the attempts in flight, drops what is left
// (counted as DropClosed) and returns when the workers have.
func (s *Sink) Close(ctx context.Context) {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.drain)
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.cancel()
			<-done
		}
		s.cancel()
		for {
			select {
			case e := <-s.q:
				s.drop(e, DropClosed, nil)
			default:
				return
			}
		}
	})
}

// work delivers events until the Sink closes.
func (s *Sink) work() {
	defer s.wg.Done()
	for {
		select {
		case e := <-s.q:
			s.deliver(e)
		case <-s.ctx.Done():
			return
		case <-s.drain:
			select {
			case e := <-s.q:
				s.deliver(e)
			default:
				return
			}
		}
	}
}

// deliver tries e up to Attempts times.
func (s *Sink) deliver(e Event) {
	var err error
	for i := range s.c.Attempts {
		if i > 0 && !s.backoff(i) {
			s.drop(e, DropClosed, err)
			return
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.c.Timeout)
		err = s.d.Deliver(ctx, e)
		cancel()
		if err == nil {
			s.sent.Add(1)
			if s.c.Observer != nil {
				s.c.Observer.Sent(s.c.Name)
			}
			return
		}
		s.failed.Add(1)
		if s.c.Observer != nil {
			s.c.Observer.Failed(s.c.Name)
		}
		if s.ctx.Err() != nil {
			s.drop(e, DropClosed, err)
			return
		}
		var p permanent
		if errors.As(err, &p) {
			break
		}
	}
	s.drop(e, DropAttempts, err)
}

// backoff waits before retry i (from 1), and reports false if the Sink
// was stopped meanwhile.
func (s *Sink) backoff(i int) bool {
	d := s.c.MinBackoff << min(i-1, 30)
	if d <= 0 || d > s.c.MaxBackoff {
		d = s.c.MaxBackoff
	}
	t := time.NewTimer(rand.N(d) + 1)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// drop counts e as dropped for reason, and logs why when it was tried.
func (s *Sink) drop(e Event, reason string, err error) {
	switch reason {
	case DropQueueFull:
		s.full.Add(1)
	case DropAttempts:
		s.gaveUp.Add(1)
	default:
		s.closedDrops.Add(1)
	}
	if s.c.Observer != nil {
		s.c.Observer.Dropped(s.c.Name, reason)
	}
	if err != nil && s.c.Logger != nil {
		s.c.Logger.Warn("notification dropped", "sink", s.c.Name, "reason", reason, "event", e.Kind,
			"jail", e.Jail, "key", e.Key, "id", e.ID, "err", err)
	}
}
