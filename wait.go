package sluice

import (
	"context"
	"time"
)

// A queueKey names the queue of waiters for one key and class: a class's
// waiters never wait behind another's, so a sheddable waiter at the head
// cannot hold up critical ones.
type queueKey struct {
	key   string
	class Class
}

// A waitQueue holds the waiters of one key and class of a Concurrency, in
// arrival order. Guarded by Concurrency.mu, except wake.
type waitQueue struct {
	waiters []*waiter
	// wake tells the head that this process released a lease on the key:
	// it asks the store again without waiting for its poll.
	wake chan struct{}
}

// MaxWaiters bounds the waiters of one key and class in a process: Wait
// beyond it is refused at once, so a flood of waiting requests costs a
// bounded queue.
const MaxWaiters = 4096

// A waiter is one call of Wait in a queue. Its turn is closed when it
// becomes the head, the only waiter that asks the store.
type waiter struct {
	turn chan struct{}
}

// Wait acquires a place for key as Acquire does, but when none is free it
// waits until one is or ctx ends. Waiters of one key and class in this
// process are served first in, first out: only the head of the queue asks
// the store, when a lease of this process on the key is released, when
// the earliest lease expires, and every Poll otherwise; when it is
// granted the next waiter becomes the head. While waiters queue, Acquire
// for the same key and class is refused rather than overtake them.
//
// When ctx ends first, Wait returns the latest denial (Allowed false)
// and a nil error, as for any denial; the error is non-nil only when the
// store failed.
func (c *Concurrency) Wait(ctx context.Context, key string, cl Class) (*Lease, error) {
	if cl >= numClasses {
		return c.Acquire(ctx, key, cl) // its error
	}
	qk := queueKey{actorKey(key), cl}
	denied := &Lease{LeaseDecision: LeaseDecision{Limit: c.limit}, Class: cl, c: c, key: qk.key}
	denied.done.Store(true)
	q, w := c.enqueue(qk)
	if w == nil {
		denied.Time = c.clock()
		return denied, nil // MaxWaiters wait already
	}
	defer c.dequeue(qk, q, w)
	select {
	case <-w.turn:
	case <-ctx.Done():
		denied.Time = c.clock()
		return denied, nil
	}
	var timer *time.Timer
	for {
		l := new(Lease)
		if err := c.acquire(ctx, qk.key, cl, l); err != nil {
			return nil, err
		}
		if l.Allowed || ctx.Err() != nil {
			return l, nil
		}
		wait := c.poll
		if l.RetryAfter > 0 && l.RetryAfter < wait {
			wait = l.RetryAfter
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-q.wake:
		case <-timer.C:
		case <-ctx.Done():
			return l, nil
		}
	}
}

// enqueue puts a new waiter at the tail of qk's queue, its turn already
// come if the queue was empty; or returns a nil waiter when the queue
// holds MaxWaiters.
func (c *Concurrency) enqueue(qk queueKey) (*waitQueue, *waiter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queues[qk]
	if q == nil {
		q = &waitQueue{wake: make(chan struct{}, 1)}
		c.queues[qk] = q
	}
	if len(q.waiters) >= MaxWaiters {
		return q, nil
	}
	w := &waiter{turn: make(chan struct{})}
	q.waiters = append(q.waiters, w)
	if len(q.waiters) == 1 {
		close(w.turn)
	}
	c.waiting.Add(1)
	return q, w
}

// dequeue removes w from q, passing the turn to the next waiter if w had
// it, and forgets q once empty.
func (c *Concurrency) dequeue(qk queueKey, q *waitQueue, w *waiter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiting.Add(-1)
	for i, x := range q.waiters {
		if x != w {
			continue
		}
		q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
		if i == 0 && len(q.waiters) > 0 {
			close(q.waiters[0].turn)
		}
		break
	}
	if len(q.waiters) == 0 {
		delete(c.queues, qk)
	}
}

// queued reports whether waiters of this process queue for key and
// class: an Acquire must not overtake them.
func (c *Concurrency) queued(key string, cl Class) bool {
	return c.waiting.Load() != 0 && c.queuedLocked(key, cl) // inlined: one load when none wait
}

// queuedLocked is queued, once some wait.
func (c *Concurrency) queuedLocked(key string, cl Class) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queues[queueKey{key, cl}] != nil
}

// wake tells the heads of key's queues that a lease on it was released.
func (c *Concurrency) wake(key string) {
	if c.waiting.Load() != 0 { // inlined: one load when none wait
		c.wakeLocked(key)
	}
}

// wakeLocked is wake, once some wait.
func (c *Concurrency) wakeLocked(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for cl := range numClasses {
		if q := c.queues[queueKey{key, cl}]; q != nil {
			select {
			case q.wake <- struct{}{}:
			default:
			}
		}
	}
}
