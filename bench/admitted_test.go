package bench

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// memEvent is one request of a trace: a key, at an offset from the
// trace's start.
type memEvent struct {
	key string
	at  time.Duration
}

// memTrace is a fixed sequence of requests under one limit.
type memTrace struct {
	name   string
	limit  memLimit
	events []memEvent
	// timed marks traces whose count depends on time passing between the
	// requests: only implementations that can be given the time run them.
	timed bool
}

// memTraceStart is when traces start: a real date, whole hour, so the
// epoch-aligned windows of the reference do not split a short trace.
var memTraceStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func memTraces() []memTrace {
	var burst, keys, refill []memEvent
	// One actor firing 1000 requests at once.
	for i := range 1000 {
		burst = append(burst, memEvent{"burst-key", time.Duration(i) * time.Microsecond})
	}
	// 10,000 actors, 5 rounds each, interleaved.
	for round := range 5 {
		for k := range 10_000 {
			keys = append(keys, memEvent{"actor-" + strconv.Itoa(k), time.Duration(round*10_000+k) * time.Microsecond})
		}
	}
	// One actor asking every 10 ms for 10 s, five times what is allowed.
	for i := range 1000 {
		refill = append(refill, memEvent{"refill-key", time.Duration(i) * 10 * time.Millisecond})
	}
	return []memTrace{
		{name: "burst", limit: memLimit{Rate: 100, Period: time.Hour, Burst: 100}, events: burst},
		{name: "keys", limit: memLimit{Rate: 3, Period: time.Hour, Burst: 3}, events: keys},
		{name: "refill", limit: memLimit{Rate: 20, Period: time.Second, Burst: 20}, events: refill, timed: true},
	}
}

// memReference replays tr through the reference semantics of model
// (package algorithm) and returns how many requests it admits. A fixed
// window opened by a key's first request matches an epoch-aligned one on
// the untimed traces, which fit in one window either way.
func memReference(t *testing.T, model string, tr memTrace) int {
	t.Helper()
	alg := sluice.FixedWindow
	if model != "fixed-first" {
		var err error
		if alg, err = sluice.ParseAlgorithm(model); err != nil {
			t.Fatalf("ParseAlgorithm(%q) = %v", model, err)
		}
	}
	l := sluiceLimit(tr.limit, alg)
	states := map[string][]int64{}
	admitted := 0
	for _, e := range tr.events {
		s, ok := states[e.key]
		if !ok {
			s = make([]int64, algorithm.Words(l))
			states[e.key] = s
		}
		if algorithm.Take(l, s, memTraceStart.Add(e.at).UnixNano(), 1).Allowed {
			admitted++
		}
	}
	return admitted
}

// TestAdmitted checks that every implementation admits what its model
// admits on fixed traces: the same count as the reference semantics, and
// never an error. Implementations that read their own clock run only the
// traces whose count does not depend on time passing.
func TestAdmitted(t *testing.T) {
	for _, tr := range memTraces() {
		for _, impl := range memImpls {
			t.Run(tr.name+"/"+impl.name, func(t *testing.T) {
				if tr.timed && !impl.injectable {
					// Not a skip of a check: the trace cannot be replayed
					// against a clock the implementation reads itself.
					t.Logf("%s reads %s: timed trace not applicable", impl.name, impl.clock)
					return
				}
				if impl.fits != nil {
					if why := impl.fits(tr.limit, 1); why != "" {
						t.Fatalf("%s cannot run %v: %s", impl.name, tr.limit, why)
					}
				}
				now := memTraceStart
				lim, err := impl.new(tr.limit, func() time.Time { return now })
				if err != nil {
					t.Fatalf("%s.new(%v) = %v", impl.name, tr.limit, err)
				}
				defer lim.close()
				got := 0
				for _, e := range tr.events {
					now = memTraceStart.Add(e.at)
					ok, err := lim.take(context.Background(), e.key)
					if err != nil {
						t.Fatalf("%s: take(%q) at %v = %v", impl.name, e.key, e.at, err)
					}
					if ok {
						got++
					}
				}
				if want := memReference(t, impl.model, tr); got != want {
					t.Errorf("%s admitted %d of %d requests under %v, want %d", impl.name, got, len(tr.events), tr.limit, want)
				}
			})
		}
	}
}

// TestAdmittedContention checks that concurrent requests on one key never
// over-admit: 8 goroutines ask 250 times each, at one instant, under
// 100/h. Errors are counted: throttled gives up after 10 failed
// compare-and-swaps and returns an error instead of a decision.
func TestAdmittedContention(t *testing.T) {
	const goroutines, each = 8, 250
	l := memLimit{Rate: 100, Period: time.Hour, Burst: 100}
	for _, impl := range memImpls {
		t.Run(impl.name, func(t *testing.T) {
			lim, err := impl.new(l, func() time.Time { return memTraceStart })
			if err != nil {
				t.Fatalf("%s.new(%v) = %v", impl.name, l, err)
			}
			defer lim.close()
			var mu sync.Mutex
			admitted, failed := 0, 0
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					ok, bad := 0, 0
					for range each {
						allowed, err := lim.take(context.Background(), "contended")
						if allowed {
							ok++
						}
						if err != nil {
							bad++
						}
					}
					mu.Lock()
					admitted += ok
					failed += bad
					mu.Unlock()
				})
			}
			wg.Wait()
			if admitted != l.Rate {
				t.Errorf("%s admitted %d of %d concurrent requests under %v, want %d", impl.name, admitted, goroutines*each, l, l.Rate)
			}
			switch {
			case failed > 0 && impl.name == "throttled":
				t.Logf("throttled: %d of %d requests failed with an error (compare-and-swap retries exhausted)", failed, goroutines*each)
			case failed > 0:
				t.Errorf("%s: %d requests failed with an error, want 0", impl.name, failed)
			}
		})
	}
}
