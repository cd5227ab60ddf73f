package load

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// MaxRate is the highest Config.Rate: one request a microsecond, more
// than a server on one machine answers, and the finest schedule the
// generator keeps.
const MaxRate = 1_000_000

// A schedule is the plan of a fixed-rate run: request i is due i/rate
// seconds after the start, for i below n.
type schedule struct {
	interval float64 // nanoseconds between two requests
	n        int64
}

// newSchedule plans the requests due before d at rate per second, at
// most requests of them if requests > 0.
func newSchedule(rate float64, d time.Duration, requests int64) schedule {
	s := schedule{interval: float64(time.Second) / rate}
	n := int64(math.Ceil(float64(d) / s.interval))
	// Settle float rounding so that exactly the requests due before d
	// are in: at(n-1) < d <= at(n).
	for n > 0 && s.at(n-1) >= d {
		n--
	}
	for s.at(n) < d {
		n++
	}
	if requests > 0 {
		n = min(n, requests)
	}
	s.n = n
	return s
}

// at returns when request i is due, from the start of the run, rounded
// to the nanosecond (so that 7 per second puts the eighth at 1s, not a
// nanosecond before).
func (s schedule) at(i int64) time.Duration {
	return time.Duration(math.Round(float64(i) * s.interval))
}

// due is a request of the schedule: its index and intended send time.
type due struct {
	i  int64
	at time.Time
}

// runRate sends the requests of cfg's schedule on time, at most
// cfg.Concurrency in flight, and measures each latency from the request's
// intended send time.
//
// The calling goroutine walks the schedule: when a request is due it
// takes one of Concurrency slots and queues the request to Concurrency
// workers, which send it and free the slot when answered. A
// request that finds every slot taken is late: the schedule waits for a
// free one, and the requests due meanwhile queue behind it, their wait
// counted in their latency. Requests still waiting when the run's time is
// up are missed, not sent. (Workers, not a goroutine per request: a new
// goroutine's stack grows on every gRPC call, which costs the generator
// CPU that the server on the same machine would miss.)
func runRate(ctx context.Context, cfg Config, cl client) *Report {
	sched := newSchedule(cfg.Rate, cfg.Duration, cfg.Requests)
	var (
		c            counters
		missed       atomic.Int64
		mu           sync.Mutex // guards latency and lag
		latency, lag = newHistogram(), newHistogram()
		wg           sync.WaitGroup
		slots        = make(chan struct{}, cfg.Concurrency)
		// A request holds a slot from when it is queued until it is
		// answered, so the queue never holds more than Concurrency
		// and never blocks the schedule.
		queue = make(chan due, cfg.Concurrency)
	)
	send := func(j due) {
		sent := time.Now()
		// Requests in flight when the schedule ends are answered, not
		// cut short: only ctx and Timeout bound them.
		rctx, rcancel := context.WithTimeout(ctx, cfg.Timeout)
		ok, err := cl.do(rctx, cfg.key(j.i))
		rcancel()
		lat := time.Since(j.at)
		<-slots
		if err != nil {
			if ctx.Err() != nil {
				missed.Add(1) // the run was stopped under it
			} else {
				c.fail(err)
			}
			return
		}
		mu.Lock()
		record(latency, lat)
		record(lag, sent.Sub(j.at))
		mu.Unlock()
		c.answer(ok, lat)
	}
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range queue {
				send(j)
			}
		}()
	}

	begin := time.Now()
	stopProgress := progress(ctx, cfg.Progress, begin, &c)
	sendCtx, cancel := context.WithDeadline(ctx, begin.Add(cfg.Duration))
	defer cancel()
	var i int64
	for ; i < sched.n; i++ {
		j := due{i, begin.Add(sched.at(i))}
		if !wait(sendCtx, j.at) || !take(sendCtx, slots, &c.late) {
			break
		}
		queue <- j
	}
	missed.Add(sched.n - i)
	// The run lasts its whole schedule, the last interval included, so
	// that the achieved rate compares with the offered one.
	wait(ctx, begin.Add(min(sched.at(sched.n), cfg.Duration)))
	close(queue)
	wg.Wait()
	elapsed := time.Since(begin)
	stopProgress()

	r := c.report(cfg, elapsed, latency)
	r.Rate, r.Scheduled, r.Late, r.Missed, r.Lag = cfg.Rate, sched.n, c.late.Load(), missed.Load(), lag
	return r
}

// take takes a slot, waiting for one if all are taken, in which case it
// counts one more late request. It reports false if ctx is done first.
func take(ctx context.Context, slots chan<- struct{}, late *atomic.Int64) bool {
	select {
	case slots <- struct{}{}:
		return true
	default:
	}
	select {
	case slots <- struct{}{}:
		late.Add(1)
		return true
	case <-ctx.Done():
		return false
	}
}

// maxNap bounds each sleep of wait, so that it notices ctx in time.
const maxNap = 10 * time.Millisecond

// wait returns when t has come (true), or when ctx is done first, or had
// already expired when t came (false). It sleeps in the kernel (nap), not
// on a Go timer: an idle Go process waits for its timers in epoll, to the
// millisecond, which would add up to a millisecond of the generator's own
// lag to every latency measured from the intended send time. The price
// is some CPU per request (a blocking system call), which the report's
// Lag does not show but a server on the same machine feels.
func wait(ctx context.Context, t time.Time) bool {
	for ctx.Err() == nil {
		d := time.Until(t)
		if d <= 0 {
			return true
		}
		nap(min(d, maxNap))
	}
	return false
}
