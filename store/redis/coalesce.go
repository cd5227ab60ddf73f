package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// A coalescer gathers the concurrent Decides of a Store into batches, as
// a database gathers concurrent commits into one log write: while
// maxInFlight calls are on their way to Redis, further requests wait in a
// queue, and the first call to come back sends the whole queue as one
// DecideBatch. A batch of GCRA takes costs Redis a third of the CPU time
// per decision that a call each does (BenchmarkDecideBatch), and under
// load Redis's CPU is what runs out first. An idle store adds nothing: a
// request that finds a free slot is sent at once, alone.
//
// Each request is still decided atomically on its own, as Decide would:
// batching changes which round trip carries it, not what it does.
type coalescer struct {
	s   *Store
	max int // most calls or batches in flight

	mu       sync.Mutex
	inFlight int
	queue    []*waiter
}

// A waiter is a request in the queue, and then its answer.
type waiter struct {
	ctx  context.Context
	r    sluice.Request
	buf  []byte // its keys and arguments (Store.appendRequest)
	ends []int
	d    sluice.Decision
	err  error
	done chan struct{} // signalled once d and err are set
}

// waiters recycles the waiters whose answer was read, a few hundred bytes
// of garbage per queued decision otherwise. Each keeps its done channel,
// which has room for the one signal of a use, and its encoding buffers.
var waiters = sync.Pool{New: func() any { return &waiter{done: make(chan struct{}, 1)} }}

// decide decides r, which check accepted, alone when a slot is free, else
// in the next batch.
func (co *coalescer) decide(ctx context.Context, r *sluice.Request) (sluice.Decision, error) {
	w := waiters.Get().(*waiter)
	w.buf, w.ends = co.s.appendRequest(w.buf[:0], w.ends[:0], r)
	co.mu.Lock()
	if co.inFlight < co.max {
		co.inFlight++
		co.mu.Unlock()
		keys, args := split(w.buf, w.ends, len(r.Limits))
		recycle(w)
		reply, err := co.s.c.eval(ctx, keys, args)
		if batch := co.next(nil); batch != nil {
			go co.drain(batch)
		}
		return decodeReply(r, reply, err)
	}
	w.ctx, w.r = ctx, *r
	co.queue = append(co.queue, w)
	co.mu.Unlock()
	select {
	case <-w.done:
		return answer(w)
	case <-ctx.Done():
	}
	co.mu.Lock()
	for i, q := range co.queue {
		if q == w { // not sent: nothing happened
			co.queue = append(co.queue[:i], co.queue[i+1:]...)
			co.mu.Unlock()
			recycle(w)
			return sluice.Decision{}, fmt.Errorf("%w: redis: %w", sluice.ErrStore, ctx.Err())
		}
	}
	co.mu.Unlock()
	select {
	case <-w.done: // answered meanwhile
		return answer(w)
	default:
	}
	// On its way: like a call whose reply was not awaited, it may still
	// be applied. Its waiter is left to the garbage collector, since the
	// batch will still write to it.
	return sluice.Decision{}, fmt.Errorf("%w: redis: %w (the request may still be applied)", sluice.ErrStore, ctx.Err())
}

// next hands the slot of a call that came back to the queue: it returns
// the queue to send next in that slot, or frees the slot and returns nil
// when the queue is empty. done is the batch that came back, if any: its
// list becomes the next queue's, so that a busy store does not grow a new
// queue for every batch.
func (co *coalescer) next(done []*waiter) []*waiter {
	clear(done)
	co.mu.Lock()
	defer co.mu.Unlock()
	if len(co.queue) == 0 {
		co.inFlight--
		return nil
	}
	batch := co.queue
	co.queue = done[:0]
	return batch
}

// drain sends batch, then each queue that gathered meanwhile, in one slot,
// until the queue is empty.
func (co *coalescer) drain(batch []*waiter) {
	for batch != nil {
		co.send(batch)
		batch = co.next(batch)
	}
}

// send decides the waiters of batch in one DecideBatch round trip and
// wakes them. It runs on a context of its own, which ends at the latest
// deadline of theirs (or never, if one has none: the client's timeouts
// then bound it), so that one waiter that gives up does not fail the
// others.
func (co *coalescer) send(batch []*waiter) {
	ctx := context.Background()
	var latest time.Time
	for _, w := range batch {
		dl, ok := w.ctx.Deadline()
		if !ok {
			latest = time.Time{}
			break
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	if !latest.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, latest)
		defer cancel()
	}
	// Every key and argument of the batch is cut from one string, into
	// one list.
	size, n := 0, 0
	for _, w := range batch {
		size, n = size+len(w.buf), n+len(w.ends)
	}
	var sb strings.Builder
	sb.Grow(size)
	for _, w := range batch {
		sb.Write(w.buf)
	}
	all := sb.String()
	lp := getList(n)
	list := (*lp)[:n]
	encoded := make([]call, len(batch))
	valid := make([]int, len(batch))
	off, li := 0, 0
	for i, w := range batch {
		cut(list[li:], all[off:off+len(w.buf)], w.ends)
		k, end := li+len(w.r.Limits), li+len(w.ends)
		encoded[i] = call{keys: list[li:k:k], args: list[k:end:end], n: 1, batchable: true}
		valid[i] = i
		off, li = off+len(w.buf), end
	}
	order, replies := co.s.roundTrip(ctx, encoded, valid)
	putList(lp)
	for j, i := range order {
		w := batch[i]
		w.d, w.err = decodeReply(&w.r, replies[j].v, replies[j].err)
		w.done <- struct{}{} // w belongs to its Decide again
	}
}

// answer returns the answer of a waiter that was signalled, and recycles
// it.
func answer(w *waiter) (sluice.Decision, error) {
	d, err := w.d, w.err
	recycle(w)
	return d, err
}

// recycle puts back a waiter that no batch holds, dropping what it
// references but its buffers, unless a large policy grew them.
func recycle(w *waiter) {
	if cap(w.buf) > 4096 {
		w.buf, w.ends = nil, nil
	}
	*w = waiter{done: w.done, buf: w.buf[:0], ends: w.ends[:0]}
	waiters.Put(w)
}
