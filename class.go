package sluice

import (
	"fmt"
	"math"
)

// A Class is a request's priority for load shedding: under pressure a
// Concurrency refuses sheddable requests first, then default ones, and
// keeps the last share of its capacity for critical ones (Stripe's
// priority load shedder). The zero value is ClassDefault.
type Class uint8

const (
	// ClassDefault is ordinary traffic: admitted while the use is below
	// the capacity less the critical reserve.
	ClassDefault Class = iota
	// ClassCritical is traffic that must get through (payments, sign-in,
	// health of the fleet): admitted up to the full capacity.
	ClassCritical
	// ClassSheddable is traffic that can wait or fail (prefetches,
	// analytics, bulk jobs): admitted only while the use is below the
	// sheddable share.
	ClassSheddable

	numClasses // keep last
)

var classNames = [numClasses]string{"default", "critical", "sheddable"}

func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", c)
}

// ParseClass parses the name of a class: "critical", "default" (or "")
// and "sheddable".
func ParseClass(s string) (Class, error) {
	if s == "" {
		return ClassDefault, nil
	}
	for i, n := range classNames {
		if n == s {
			return Class(i), nil
		}
	}
	return 0, fmt.Errorf("%w: class %q, want critical, default or sheddable", ErrInvalidRequest, s)
}

// Shares set how much of a capacity each class may use. The zero value
// means the defaults, Stripe's: sheddable traffic below 50% of the
// capacity in use, default traffic below 80%, critical traffic up to
// 100%.
type Shares struct {
	// Sheddable is the share of the capacity below which sheddable
	// requests are admitted, in (0, 1]. Default 0.5.
	Sheddable float64
	// CriticalReserve is the share of the capacity kept for critical
	// requests: default ones are admitted below 1 − CriticalReserve, in
	// [0, 1). Default 0.2.
	CriticalReserve float64
}

// withDefaults returns s with its zero fields set to their defaults, or
// an error for shares out of range.
func (s Shares) withDefaults() (Shares, error) {
	if s.Sheddable == 0 {
		s.Sheddable = 0.5
	}
	if s.CriticalReserve == 0 {
		s.CriticalReserve = 0.2
	}
	if !(s.Sheddable > 0 && s.Sheddable <= 1) || !(s.CriticalReserve >= 0 && s.CriticalReserve < 1) {
		return s, fmt.Errorf("%w: shares sheddable %v (want (0, 1]), critical reserve %v (want [0, 1))",
			ErrInvalidRequest, s.Sheddable, s.CriticalReserve)
	}
	return s, nil
}

// Ceiling returns how many may be in use, at most, when a request of
// class c is admitted under a capacity of limit: the request is admitted
// while fewer than Ceiling are in use. A class's share is rounded up, so
// that a capacity of 1 still admits every class when idle, and a
// sheddable share never exceeds default's.
func (s Shares) Ceiling(c Class, limit int) int {
	s, err := s.withDefaults()
	if err != nil || limit < 1 {
		return max(limit, 0)
	}
	switch c {
	case ClassCritical:
		return limit
	case ClassSheddable:
		return min(share(s.Sheddable, limit), share(1-s.CriticalReserve, limit))
	}
	return share(1-s.CriticalReserve, limit)
}

// share returns ⌈f·limit⌉, at least 1 and at most limit, with a margin
// for the rounding of f (0.8·10 is 8.000000000000002).
func share(f float64, limit int) int {
	n := int(math.Ceil(f*float64(limit) - 1e-9))
	return min(max(n, 1), limit)
}
