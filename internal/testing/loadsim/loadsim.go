// Package loadsim simulates, in simulated time, a server whose latency
// rises with load, driven by closed-loop clients through an admission
// function: the test bed of adaptive limits and load shedding. It is
// deterministic: no goroutines, no clock, no randomness.
//
// The server shares its work as a processor does: with n requests in
// flight and a capacity of C, each progresses at min(1, C/n) of full
// speed, so a request alone takes Work and with n > C in flight takes
// about Work·n/C. Each client sends one request at a time: when refused it
// tries again after Think; when its request completes (or it gives up
// after Timeout) it sends the next at once.
package loadsim

import "time"

// Config configures a simulation. Every field must be set but Timeout.
type Config struct {
	Capacity int           // requests the server runs at full speed at once
	Work     time.Duration // time of a request alone
	Clients  int           // closed-loop clients
	Think    time.Duration // a refused client's pause before it retries
	Timeout  time.Duration // a client gives up after this (0: never); the request is dropped
	Tick     time.Duration // step of simulated time
}

// Admit decides whether client may send a request at now. If it may, it
// returns done, which the simulation calls when the request ends: at its
// completion, or with dropped true when the client gave up on it.
type Admit func(now time.Time, client int) (done func(now time.Time, dropped bool), ok bool)

// Stats are what one client saw.
type Stats struct {
	Completed, Refused, Dropped int
	Latency                     time.Duration // sum over completed requests
}

// A Sim is one simulation: a server, its clients and the clock they
// share, which the admission function and the limits under test read.
type Sim struct {
	c        Config
	admit    Admit
	now      time.Time
	ready    []time.Time // when each idle client sends; zero: busy
	inflight []*request
}

// New returns a Sim of c whose clock starts at start, its clients all
// about to send, asking admit for each request.
func New(start time.Time, c Config, admit Admit) *Sim {
	s := &Sim{c: c, admit: admit, now: start, ready: make([]time.Time, c.Clients)}
	for i := range s.ready {
		s.ready[i] = start
	}
	return s
}

// Now returns the simulated time.
func (s *Sim) Now() time.Time { return s.now }

type request struct {
	client int
	start  time.Time
	left   time.Duration // work left at full speed
	done   func(time.Time, bool)
}

// Run runs the simulation for d more of simulated time and returns what
// each client saw in that time and the most requests in flight at once.
func (s *Sim) Run(d time.Duration) (stats []Stats, maxInFlight int) {
	stats = make([]Stats, s.c.Clients)
	for end := s.now.Add(d); s.now.Before(end); s.now = s.now.Add(s.c.Tick) {
		s.progress(stats)
		for i, at := range s.ready {
			if at.IsZero() || at.After(s.now) {
				continue
			}
			done, ok := s.admit(s.now, i)
			if !ok {
				stats[i].Refused++
				s.ready[i] = s.now.Add(s.c.Think)
				continue
			}
			s.ready[i] = time.Time{}
			s.inflight = append(s.inflight, &request{client: i, start: s.now, left: s.c.Work, done: done})
		}
		maxInFlight = max(maxInFlight, len(s.inflight))
	}
	return stats, maxInFlight
}

// progress advances the requests in flight by one tick of shared work and
// ends those that completed or timed out.
func (s *Sim) progress(stats []Stats) {
	n := len(s.inflight)
	if n == 0 {
		return
	}
	step := s.c.Tick
	if n > s.c.Capacity {
		step = s.c.Tick * time.Duration(s.c.Capacity) / time.Duration(n)
	}
	kept := s.inflight[:0]
	for _, r := range s.inflight {
		r.left -= step
		rtt := s.now.Sub(r.start)
		switch {
		case r.left <= 0:
			stats[r.client].Completed++
			stats[r.client].Latency += rtt
			r.done(s.now, false)
		case s.c.Timeout > 0 && rtt >= s.c.Timeout:
			stats[r.client].Dropped++
			r.done(s.now, true)
		default:
			kept = append(kept, r)
			continue
		}
		s.ready[r.client] = s.now
	}
	clear(s.inflight[len(kept):])
	s.inflight = kept
}
