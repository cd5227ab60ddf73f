package accuracy

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// Start is the time every trace starts from: a real date, aligned to every
// whole minute, hour and day since the Unix epoch, and far from the zero
// that stores read as empty state.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// A Request is one take in a trace.
type Request struct {
	// Key is the actor whose state the take counts against.
	Key string
	// Now is the time the caller's clock read, in Unix nanoseconds. It may
	// be earlier than an earlier request's (late goroutines, clock steps).
	Now int64
	// Cost is the number of units taken, at least 1.
	Cost int
	// Filler marks a take that is applied only to load the store (other
	// actors competing for its room): it is not judged or counted.
	Filler bool
}

// A Trace is a sequence of takes, applied one after another in order.
//
// The zero value is an empty trace. A Trace is a plain value; do not
// change its Requests while a measurement reads them.
type Trace struct {
	// Name identifies the trace in the report: "boundary-burst",
	// "poisson-3x", "step-back-1m".
	Name string
	// Requests are applied in this order, which is the order in which a
	// store would see them, whatever their times.
	Requests []Request
}

// Traces returns the adversarial traces the report runs against l for one
// actor, key, generated from seed: the same arguments always give the same
// traces. Traffic rates are multiples of l's Rate per Period.
func Traces(l sluice.Limit, key string, seed uint64) []Trace {
	p := int64(l.Period)
	return []Trace{
		BoundaryBurst(l, key),
		Jittered(l, key, seed, 2, 5*time.Millisecond),
		Jittered(l, key, seed, 2, l.Period/10),
		SteppedBack(l, key, seed, 2, time.Second),
		SteppedBack(l, key, seed, 2, l.Period),
		Poisson(l, key, seed, 0.5, 20*p),
		Poisson(l, key, seed, 1, 20*p),
		Poisson(l, key, seed, 3, 20*p),
		MixedCost(l, key, seed, 2, 10*p, 5),
	}
}

// BoundaryBurst is the classic fixed-window trace: one request opens the trace, then Rate
// requests a tenth of a second (Period/600) before a window boundary and
// Rate a tenth of a second after it: for 100/min, 1 at t=0, 100 at 59.9 s
// and 100 at 60.1 s. The trace is placed as an attacker who reads the
// reset time off the responses would place it: t=0 falls 50 ms
// (Period/1200) before a boundary of the limit's fixed windows, staggered
// for key when l is, so that the bursts straddle the next boundary.
func BoundaryBurst(l sluice.Limit, key string) Trace {
	p := int64(l.Period)
	delta := p / 600
	first := windowStart(l, key, Start.UnixNano()) + p - delta/2
	tr := Trace{Name: "boundary-burst", Requests: []Request{{Key: key, Now: first, Cost: 1}}}
	for _, at := range []int64{first + p - delta, first + p + delta} {
		for range l.Rate {
			tr.Requests = append(tr.Requests, Request{Key: key, Now: at, Cost: 1})
		}
	}
	return tr
}

// Poisson is random traffic at mult times the limit's rate, arrivals
// exponentially spaced, for the span d (in nanoseconds), cost 1.
func Poisson(l sluice.Limit, key string, seed uint64, mult float64, d int64) Trace {
	rng := rand.New(rand.NewPCG(seed, 1))
	name := "poisson-" + strconv.FormatFloat(mult, 'g', -1, 64) + "x"
	return Trace{Name: name, Requests: arrivals(rng, l, key, mult, d, 1)}
}

// MixedCost is Poisson traffic at mult times the rate (counted in
// requests, not units) whose costs are uniform in 1..maxCost.
func MixedCost(l sluice.Limit, key string, seed uint64, mult float64, d int64, maxCost int) Trace {
	rng := rand.New(rand.NewPCG(seed, 2))
	name := fmt.Sprintf("cost-1..%d-%gx", maxCost, mult)
	return Trace{Name: name, Requests: arrivals(rng, l, key, mult, d, min(maxCost, l.MaxBurst()))}
}

// Jittered is Poisson traffic at mult times the rate whose times were read
// by goroutines scheduled late: each request is applied in the order of
// its true time, but carries a time up to jitter earlier, uniformly.
func Jittered(l sluice.Limit, key string, seed uint64, mult float64, jitter time.Duration) Trace {
	rng := rand.New(rand.NewPCG(seed, 3))
	reqs := arrivals(rng, l, key, mult, 10*int64(l.Period), 1)
	for i := range reqs {
		reqs[i].Now -= rng.Int64N(int64(jitter) + 1)
	}
	return Trace{Name: "jitter-" + shortDuration(jitter), Requests: reqs}
}

// SteppedBack is Poisson traffic at mult times the rate during which the
// clock is stepped back once, by step, halfway through: every later
// request carries a time step earlier than its true one.
func SteppedBack(l sluice.Limit, key string, seed uint64, mult float64, step time.Duration) Trace {
	rng := rand.New(rand.NewPCG(seed, 4))
	d := 10 * int64(l.Period)
	reqs := arrivals(rng, l, key, mult, d, 1)
	mid := Start.UnixNano() + d/2
	for i := range reqs {
		if reqs[i].Now >= mid {
			reqs[i].Now -= int64(step)
		}
	}
	return Trace{Name: "step-back-" + shortDuration(step), Requests: reqs}
}

// Interleaved is Poisson traffic from keys actors, each at mult times the
// rate, merged in time order over the span d: many actors competing for
// a store's room.
func Interleaved(l sluice.Limit, keys int, seed uint64, mult float64, d int64) Trace {
	rng := rand.New(rand.NewPCG(seed, 5))
	// The merge of independent Poisson streams is one Poisson stream of
	// the summed rate whose arrivals pick their actor uniformly.
	reqs := arrivals(rng, l, "", mult*float64(keys), d, 1)
	for i := range reqs {
		reqs[i].Key = "actor-" + strconv.Itoa(rng.IntN(keys))
	}
	return Trace{Name: fmt.Sprintf("interleaved-%d-keys", keys), Requests: reqs}
}

// Crowd is Interleaved traffic from keys actors at mult times the rate
// each, for the span d: more actors than a small store holds, so that it
// must evict actors that are part way through their allowance.
func Crowd(l sluice.Limit, keys int, seed uint64, mult float64, d int64) Trace {
	tr := Interleaved(l, keys, seed, mult, d)
	tr.Name = fmt.Sprintf("evict-crowd-%d", keys)
	return tr
}

// Attack is attackers actors at mult times the rate each, among light
// users arriving at lightPerSec per second who make one take each (as
// Filler), for the span d: a store at its cap must make room for the
// light users without forgetting the attackers, who are over their limit.
func Attack(l sluice.Limit, attackers int, seed uint64, mult, lightPerSec float64, d int64) Trace {
	rng := rand.New(rand.NewPCG(seed, 6))
	reqs := arrivals(rng, l, "", mult*float64(attackers), d, 1)
	for i := range reqs {
		reqs[i].Key = "attacker-" + strconv.Itoa(rng.IntN(attackers))
	}
	lights := arrivals(rng, sluice.Limit{Rate: 1, Period: time.Second}, "", lightPerSec, d, 1)
	for i := range lights {
		lights[i].Key, lights[i].Filler = "light-"+strconv.Itoa(i), true
	}
	merged := make([]Request, 0, len(reqs)+len(lights))
	for len(reqs)+len(lights) > 0 {
		if len(lights) == 0 || len(reqs) > 0 && reqs[0].Now <= lights[0].Now {
			merged, reqs = append(merged, reqs[0]), reqs[1:]
		} else {
			merged, lights = append(merged, lights[0]), lights[1:]
		}
	}
	return Trace{Name: fmt.Sprintf("evict-attack-%d", attackers), Requests: merged}
}

// arrivals returns Poisson arrivals at mult·Rate per Period from Start
// over the span d, each with a cost uniform in 1..maxCost.
func arrivals(rng *rand.Rand, l sluice.Limit, key string, mult float64, d int64, maxCost int) []Request {
	mean := float64(l.Period) / (float64(l.Rate) * mult)
	start := Start.UnixNano()
	var reqs []Request
	for t := start; ; {
		t += int64(rng.ExpFloat64()*mean) + 1
		if t >= start+d {
			return reqs
		}
		reqs = append(reqs, Request{Key: key, Now: t, Cost: 1 + rng.IntN(maxCost)})
	}
}

// windowStart returns the start of the fixed window of l holding t for
// key: windows are aligned to the epoch, shifted by key's offset when l
// is a Staggered FixedWindow (see staggerOffset).
func windowStart(l sluice.Limit, key string, t int64) int64 {
	p := int64(l.Period)
	off := staggerOffset(l, key)
	return floorDiv(t-off, p)*p + off
}

// staggerOffset is where a Staggered FixedWindow's windows start for key,
// as package algorithm documents it: the 64-bit FNV-1a hash of the key
// modulo the period. It is computed here with hash/fnv, independently.
func staggerOffset(l sluice.Limit, key string) int64 {
	if !l.Staggered || l.Algorithm != sluice.FixedWindow {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	return int64(h.Sum64() % uint64(l.Period))
}

// floorDiv returns ⌊a/b⌋ for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// shortDuration writes d as "5ms", "6s" or "1m".
func shortDuration(d time.Duration) string {
	for _, u := range []struct {
		suffix string
		d      time.Duration
	}{{"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}} {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.suffix
		}
	}
	return d.String()
}
