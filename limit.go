package sluice

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Algorithm names the way a [Limit] counts events. The zero value is [GCRA].
type Algorithm uint8

const (
	// GCRA is the generic cell rate algorithm: a token bucket of Burst
	// tokens that refills one token every Period/Rate, kept as one
	// timestamp. It is the default.
	GCRA Algorithm = iota
	// FixedWindow counts events in consecutive windows of length Period,
	// aligned to the Unix epoch (or to a per-key offset when the limit is
	// Staggered). It admits up to 2×Rate across a window boundary.
	FixedWindow
	// SlidingWindow is the sliding window counter in strict mode: Buckets
	// sub-window counters, the oldest partly covered one counted in full, so
	// it never admits more than Rate in any window of length Period.
	SlidingWindow
	// ApproxSlidingWindow is the sliding window counter in approximate mode:
	// the oldest partly covered sub-window is weighted by how much of it
	// still lies inside the window, as Cloudflare and HAProxy do.
	ApproxSlidingWindow
	// SlidingLog keeps the time of every admitted event: exactly at most
	// Rate events in any window of length Period, with O(Rate) state.
	SlidingLog

	numAlgorithms // keep last
)

var algorithmNames = [numAlgorithms]string{"gcra", "fixed", "sliding", "approx", "log"}

// String returns the algorithm's name as ParseLimit reads it: "gcra",
// "fixed", "sliding", "approx" or "log".
func (a Algorithm) String() string {
	if a < numAlgorithms {
		return algorithmNames[a]
	}
	return "Algorithm(" + strconv.Itoa(int(a)) + ")"
}

// ParseAlgorithm returns the algorithm named s, as [Algorithm.String]
// writes it. It also accepts the long forms "fixed-window",
// "sliding-window", "approx-sliding-window" and "sliding-log".
func ParseAlgorithm(s string) (Algorithm, error) {
	switch strings.ToLower(s) {
	case "gcra", "token-bucket":
		return GCRA, nil
	case "fixed", "fixed-window":
		return FixedWindow, nil
	case "sliding", "sliding-window":
		return SlidingWindow, nil
	case "approx", "approx-sliding-window":
		return ApproxSlidingWindow, nil
	case "log", "sliding-log":
		return SlidingLog, nil
	}
	return 0, fmt.Errorf("%w: unknown algorithm %q (want %s)", ErrInvalidLimit, s, algorithmList)
}

// algorithmList lists the names ParseAlgorithm reads, for messages.
const algorithmList = "gcra, fixed, sliding, approx or log"

// Bounds on a Limit, checked by [Limit.Validate]. They keep every
// computation inside int64 nanoseconds and every state small.
const (
	// MaxPeriod is the longest Period: ten years.
	MaxPeriod = 10 * 366 * 24 * time.Hour
	// MaxLogRate is the largest Rate of a SlidingLog limit, whose state
	// holds one timestamp per admitted event.
	MaxLogRate = 100_000
	// MaxBuckets is the most sub-windows of a sliding window counter.
	MaxBuckets = 3600
	// DefaultBuckets is the number of sub-windows of a sliding window
	// counter whose Buckets field is zero.
	DefaultBuckets = 10
)

// A Limit allows Rate events per Period, counted by Algorithm.
//
// The zero value is not a valid limit; build one with [PerSecond],
// [PerMinute], [PerHour], [PerDay], [Every], [ParseLimit] or a literal.
// A Limit is a plain value: copy it freely.
//
// (Its small fields sit together so that a Limit, which every Decision
// holds, takes 40 bytes rather than 48.)
type Limit struct {
	// Rate is how many events (units of cost) are allowed per Period.
	// It must be at least 1.
	Rate int
	// Period is the length of the window over which Rate applies.
	// It must be positive and at most MaxPeriod.
	Period time.Duration
	// Burst is the most events GCRA admits at once. Zero means Rate.
	// Only GCRA reads it: the window algorithms admit Rate per window.
	Burst int
	// Algorithm chooses how events are counted. The zero value is GCRA.
	Algorithm Algorithm
	// Staggered starts a FixedWindow's windows at an offset derived from
	// the key, so that all actors do not get a fresh window at the same
	// instant. Only FixedWindow reads it.
	Staggered bool
	// Buckets is the number of sub-windows of SlidingWindow and
	// ApproxSlidingWindow. Zero means DefaultBuckets. More buckets bring
	// the sliding window counter closer to the exact sliding log, at
	// 8 bytes of state each.
	Buckets int
}

// PerSecond returns a GCRA limit of n events per second.
func PerSecond(n int) Limit { return Limit{Rate: n, Period: time.Second} }

// PerMinute returns a GCRA limit of n events per minute.
func PerMinute(n int) Limit { return Limit{Rate: n, Period: time.Minute} }

// PerHour returns a GCRA limit of n events per hour.
func PerHour(n int) Limit { return Limit{Rate: n, Period: time.Hour} }

// PerDay returns a GCRA limit of n events per 24 hours.
func PerDay(n int) Limit { return Limit{Rate: n, Period: 24 * time.Hour} }

// Every returns a GCRA limit of one event every d.
func Every(d time.Duration) Limit { return Limit{Rate: 1, Period: d} }

// MaxBurst returns the largest cost a single request may have: Burst (or
// Rate when Burst is zero) for GCRA, Rate for the window algorithms.
func (l Limit) MaxBurst() int {
	if l.Algorithm == GCRA && l.Burst > 0 {
		return l.Burst
	}
	return l.Rate
}

// BucketCount returns the number of sub-windows a sliding window counter
// uses: Buckets, or DefaultBuckets when Buckets is zero.
func (l Limit) BucketCount() int {
	if l.Buckets > 0 {
		return l.Buckets
	}
	return DefaultBuckets
}

// Interval returns the GCRA emission interval, Period/Rate rounded up to a
// whole nanosecond, so that rounding never admits more than Rate per Period.
func (l Limit) Interval() time.Duration {
	return (l.Period + time.Duration(l.Rate) - 1) / time.Duration(l.Rate)
}

// Validate reports whether l is a limit the algorithms can apply, and why
// not. Every error wraps ErrInvalidLimit.
func (l Limit) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidLimit}, args...)...)
	}
	switch {
	case l.Algorithm >= numAlgorithms:
		return bad("unknown algorithm %d", l.Algorithm)
	case l.Rate < 1:
		return bad("rate %d must be at least 1", l.Rate)
	case l.Period <= 0:
		return bad("period %v must be positive", l.Period)
	case l.Period > MaxPeriod:
		return bad("period %v is longer than %v", l.Period, MaxPeriod)
	case l.Burst < 0:
		return bad("burst %d must not be negative", l.Burst)
	case l.Buckets < 0 || l.Buckets > MaxBuckets:
		return bad("buckets %d must be between 0 and %d", l.Buckets, MaxBuckets)
	case l.Algorithm == SlidingLog && l.Rate > MaxLogRate:
		return bad("sliding log rate %d is more than %d (it keeps one timestamp per event)", l.Rate, MaxLogRate)
	case int64(l.Rate) > int64(l.Period):
		return bad("rate %d per %v is more than one event per nanosecond", l.Rate, l.Period)
	}
	if l.Algorithm == GCRA && !burstInRange(l) {
		return bad("burst %d at one event per %v spans more than %v", l.MaxBurst(), l.Interval(), MaxPeriod)
	}
	if (l.Algorithm == SlidingWindow || l.Algorithm == ApproxSlidingWindow) && l.Period < time.Duration(l.BucketCount()) {
		return bad("period %v is too short for %d buckets", l.Period, l.BucketCount())
	}
	return nil
}

// burstInRange reports whether Burst·Interval, the GCRA bucket's depth in
// time, is at most MaxPeriod. Validate runs on every decision, so the
// common case costs no division: Interval = ⌈Period/Rate⌉ ≤
// (Period+Rate-1)/Rate, and Burst·(Period+Rate-1) ≤ MaxPeriod·Rate (in 128
// bits) suffices. Only when that bound fails is the exact division done.
func burstInRange(l Limit) bool {
	b := uint64(l.MaxBurst())
	hi, lo := bits.Mul64(b, uint64(l.Period)+uint64(l.Rate)-1)
	mhi, mlo := bits.Mul64(uint64(MaxPeriod), uint64(l.Rate))
	if hi < mhi || (hi == mhi && lo <= mlo) {
		return true
	}
	return b <= uint64(MaxPeriod)/uint64(l.Interval())
}

// units maps the names ParseLimit accepts after "/" to their length. The
// first name of each length is the one String writes.
var units = []struct {
	names []string
	d     time.Duration
}{
	{[]string{"s", "sec", "second", "seconds"}, time.Second},
	{[]string{"min", "m", "minute", "minutes"}, time.Minute},
	{[]string{"h", "hr", "hour", "hours"}, time.Hour},
	{[]string{"day", "d", "days"}, 24 * time.Hour},
	{[]string{"week", "w", "weeks"}, 7 * 24 * time.Hour},
	{[]string{"ms", "millisecond", "milliseconds"}, time.Millisecond},
}

// String returns l in the form ParseLimit reads, such as "100/min",
// "10/s burst 20", "30/5m" or "1000/h sliding buckets 60". For a valid
// limit, ParseLimit(l.String()) returns l.
func (l Limit) String() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(l.Rate))
	b.WriteByte('/')
	b.WriteString(formatPeriod(l.Period))
	if l.Burst != 0 {
		b.WriteString(" burst ")
		b.WriteString(strconv.Itoa(l.Burst))
	}
	if l.Algorithm != GCRA {
		b.WriteByte(' ')
		b.WriteString(l.Algorithm.String())
	}
	if l.Buckets != 0 {
		b.WriteString(" buckets ")
		b.WriteString(strconv.Itoa(l.Buckets))
	}
	if l.Staggered {
		b.WriteString(" staggered")
	}
	return b.String()
}

// formatPeriod writes a unit name for a period of exactly one unit, and
// otherwise the largest whole unit that divides it ("5m", "36h", "90s").
func formatPeriod(d time.Duration) string {
	for _, u := range units {
		if d == u.d {
			return u.names[0]
		}
	}
	for _, u := range []struct {
		suffix string
		d      time.Duration
	}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}, {"us", time.Microsecond}} {
		if d > 0 && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

// ParseLimit parses the human form of a limit used in configs and on the
// command line:
//
//	100/min              100 per minute (GCRA, burst 100)
//	10/s burst 20        10 per second, up to 20 at once
//	5000/day             5000 per 24 hours
//	30 per 5m            30 per five minutes
//	1000/h sliding       strict sliding window counter
//	1000/h approx buckets 60
//	10/min fixed staggered
//
// The period is a unit (s, sec, second, m, min, minute, h, hr, hour, d,
// day, w, week, ms), a Go duration ("5m", "1h30m") or a count of days or
// weeks ("2d", "1w"). Options follow in any order: "burst N", an algorithm
// name (gcra, fixed, sliding, approx, log), "buckets N" and "staggered".
// The result is validated; errors wrap ErrInvalidLimit and quote the input.
func ParseLimit(s string) (Limit, error) {
	l, err := parseLimit(s)
	if err != nil {
		return Limit{}, fmt.Errorf("limit %q: %w", s, err)
	}
	return l, nil
}

func parseLimit(s string) (Limit, error) {
	var l Limit
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return l, fmt.Errorf("%w: empty", ErrInvalidLimit)
	}
	// Accept "N/P", "N / P" and "N per P" by normalising to N, P.
	head := fields[0]
	rest := fields[1:]
	var rate, period string
	switch {
	case strings.Contains(head, "/"):
		rate, period, _ = strings.Cut(head, "/")
		if period == "" && len(rest) > 0 {
			period, rest = rest[0], rest[1:]
		}
	case len(rest) >= 2 && (rest[0] == "/" || strings.EqualFold(rest[0], "per")):
		rate, period, rest = head, rest[1], rest[2:]
	case len(rest) >= 1 && strings.HasPrefix(rest[0], "/"):
		rate, period, rest = head, rest[0][1:], rest[1:]
	default:
		return l, fmt.Errorf("%w: want RATE/PERIOD or RATE per PERIOD", ErrInvalidLimit)
	}
	n, err := parseCount(rate, "rate")
	if err != nil {
		return l, err
	}
	l.Rate = n
	if l.Period, err = parsePeriod(period); err != nil {
		return l, err
	}
	if err := l.parseOptions(rest); err != nil {
		return l, err
	}
	return l, l.Validate()
}

// parseOptions sets the options of rest, the words after a limit's
// RATE/PERIOD: an algorithm, burst N, buckets N, staggered.
func (l *Limit) parseOptions(rest []string) error {
	seen := map[string]bool{}
	for len(rest) > 0 {
		word := strings.ToLower(rest[0])
		rest = rest[1:]
		opt := word
		if _, err := ParseAlgorithm(word); err == nil {
			opt = "algorithm"
		}
		if seen[opt] {
			return fmt.Errorf("%w: %s given twice", ErrInvalidLimit, opt)
		}
		seen[opt] = true
		switch opt {
		case "burst", "buckets":
			if len(rest) == 0 {
				return fmt.Errorf("%w: %s needs a number", ErrInvalidLimit, word)
			}
			n, err := parseCount(rest[0], word)
			if err != nil {
				return err
			}
			rest = rest[1:]
			if word == "burst" {
				l.Burst = n
			} else {
				l.Buckets = n
			}
		case "staggered":
			l.Staggered = true
		case "algorithm":
			l.Algorithm, _ = ParseAlgorithm(word)
		default:
			return fmt.Errorf("%w: unknown option %q (want an algorithm: %s; or burst N, buckets N or staggered)",
				ErrInvalidLimit, word, algorithmList)
		}
	}
	return nil
}

func parseCount(s, what string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%w: %s %q is not a whole number ≥ 1", ErrInvalidLimit, what, s)
	}
	return n, nil
}

// parsePeriod reads a unit name, a Go duration, or a whole number of days
// ("2d") or weeks ("1w"), which time.ParseDuration does not know.
func parsePeriod(s string) (time.Duration, error) {
	ls := strings.ToLower(s)
	for _, u := range units {
		for _, name := range u.names {
			if ls == name {
				return u.d, nil
			}
		}
	}
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if num, ok := strings.CutSuffix(ls, suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil || n < 1 || n > int64(MaxPeriod/unit) {
				return 0, fmt.Errorf("%w: period %q", ErrInvalidLimit, s)
			}
			return time.Duration(n) * unit, nil
		}
	}
	d, err := time.ParseDuration(ls)
	if err != nil {
		return 0, fmt.Errorf("%w: period %q is not a unit (s, min, h, day, week) or a duration (5m, 1h30m, 2d)", ErrInvalidLimit, s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%w: period %q must be positive", ErrInvalidLimit, s)
	}
	return d, nil
}
