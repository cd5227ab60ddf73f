package sluice

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func TestParseLimit(t *testing.T) {
	tests := []struct {
		in   string
		want Limit
	}{
		{"100/min", Limit{Rate: 100, Period: time.Minute}},
		{"100/m", Limit{Rate: 100, Period: time.Minute}},
		{"10/s burst 20", Limit{Rate: 10, Period: time.Second, Burst: 20}},
		{"5000/day", Limit{Rate: 5000, Period: 24 * time.Hour}},
		{"30 per 5m", Limit{Rate: 30, Period: 5 * time.Minute}},
		{"30 / 5m", Limit{Rate: 30, Period: 5 * time.Minute}},
		{"30 /5m", Limit{Rate: 30, Period: 5 * time.Minute}},
		{"30/ 5m", Limit{Rate: 30, Period: 5 * time.Minute}},
		{"1/1h30m", Limit{Rate: 1, Period: 90 * time.Minute}},
		{"7/2d", Limit{Rate: 7, Period: 48 * time.Hour}},
		{"7/1w", Limit{Rate: 7, Period: 7 * 24 * time.Hour}},
		{"3/Hour", Limit{Rate: 3, Period: time.Hour}},
		{"1000/h sliding", Limit{Rate: 1000, Period: time.Hour, Algorithm: SlidingWindow}},
		{"1000/h approx buckets 60", Limit{Rate: 1000, Period: time.Hour, Algorithm: ApproxSlidingWindow, Buckets: 60}},
		{"10/min fixed staggered", Limit{Rate: 10, Period: time.Minute, Algorithm: FixedWindow, Staggered: true}},
		{"10/min staggered fixed-window", Limit{Rate: 10, Period: time.Minute, Algorithm: FixedWindow, Staggered: true}},
		{"50/s log", Limit{Rate: 50, Period: time.Second, Algorithm: SlidingLog}},
		{"2/500ms gcra burst 4", Limit{Rate: 2, Period: 500 * time.Millisecond, Burst: 4}},
	}
	for _, tt := range tests {
		got, err := ParseLimit(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseLimitErrors(t *testing.T) {
	for _, in := range []string{
		"", "   ", "100", "100/", "/min", "abc/min", "0/min", "-1/min", "1.5/min",
		"10/fortnight", "10/0s", "10/-5m", "10/min burst", "10/min burst x", "10/min burst 0",
		"10/min burst 5 burst 6", "10/min fixed sliding", "10/min wibble", "99999999999999999999/s",
		"10/20000d", "2000000000/ns", "200000/s log", "10/s buckets 4000", "10/min buckets",
		"10 per", "10 per min extra words", "1/1ns sliding",
	} {
		l, err := ParseLimit(in)
		if err == nil {
			t.Errorf("ParseLimit(%q) = %+v, want an error", in, l)
			continue
		}
		if !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("ParseLimit(%q) error %v does not wrap ErrInvalidLimit", in, err)
		}
		if !strings.Contains(err.Error(), in) {
			t.Errorf("ParseLimit(%q) error %q does not quote the input", in, err)
		}
	}
}

func TestLimitStringRoundTrip(t *testing.T) {
	for _, l := range []Limit{
		PerSecond(10), PerMinute(100), PerHour(3), PerDay(5000), Every(90 * time.Second),
		Every(1500 * time.Millisecond), Every(7 * time.Microsecond), {Rate: 1, Period: 1234567 * time.Nanosecond},
		{Rate: 10, Period: time.Second, Burst: 20},
		{Rate: 10, Period: 36 * time.Hour, Algorithm: SlidingWindow, Buckets: 36},
		{Rate: 10, Period: time.Minute, Algorithm: FixedWindow, Staggered: true},
		{Rate: 10, Period: 7 * 24 * time.Hour, Algorithm: SlidingLog},
		{Rate: 10, Period: 14 * 24 * time.Hour, Algorithm: ApproxSlidingWindow},
	} {
		s := l.String()
		got, err := ParseLimit(s)
		if err != nil || got != l {
			t.Errorf("ParseLimit(%v.String() = %q) = %+v, %v; want %+v", l, s, got, err, l)
		}
	}
}

func TestLimitValidate(t *testing.T) {
	// A burst whose depth is exactly MaxPeriod is valid (guard's ban limit).
	edge := Limit{Rate: 316_224_000, Period: MaxPeriod}
	if err := edge.Validate(); err != nil {
		t.Errorf("%+v.Validate() = %v, want nil", edge, err)
	}
	bad := []Limit{
		{},
		{Rate: 1},
		{Period: time.Second},
		{Rate: 1, Period: -time.Second},
		{Rate: 1, Period: MaxPeriod + 1},
		{Rate: 1, Period: time.Second, Burst: -1},
		{Rate: 1, Period: time.Second, Algorithm: 99},
		{Rate: 1, Period: time.Second, Buckets: -1},
		{Rate: MaxLogRate + 1, Period: time.Hour, Algorithm: SlidingLog},
		{Rate: 2, Period: 1},
		{Rate: 1, Period: MaxPeriod, Burst: 2},
	}
	for _, l := range bad {
		if err := l.Validate(); !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("%+v.Validate() = %v, want ErrInvalidLimit", l, err)
		}
	}
}

func TestStateID(t *testing.T) {
	base := Limit{Rate: 10, Period: time.Second}
	same := []Limit{{Rate: 20, Period: time.Second}, {Rate: 10, Period: time.Second, Burst: 50}, {Rate: 10, Period: time.Second, Staggered: true}}
	for _, l := range same {
		if l.StateID() != base.StateID() {
			t.Errorf("%v.StateID() != %v.StateID(), want equal", l, base)
		}
	}
	differ := []Limit{
		{Rate: 10, Period: time.Minute},
		{Rate: 10, Period: time.Second, Algorithm: FixedWindow},
		{Rate: 10, Period: time.Second, Algorithm: FixedWindow, Staggered: true},
		{Rate: 10, Period: time.Second, Algorithm: SlidingWindow},
		{Rate: 10, Period: time.Second, Algorithm: SlidingWindow, Buckets: 20},
	}
	seen := map[uint64]Limit{base.StateID(): base}
	for _, l := range differ {
		if prev, ok := seen[l.StateID()]; ok {
			t.Errorf("%v and %v share StateID %x", l, prev, l.StateID())
		}
		seen[l.StateID()] = l
	}
}

func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"100/min", "10/s burst 20", "30 per 5m", "1000/h approx buckets 60", "10/min fixed staggered", "5/1w log"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLimit(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidLimit) {
				t.Fatalf("ParseLimit(%q) error %v does not wrap ErrInvalidLimit", s, err)
			}
			return
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("ParseLimit(%q) = %+v, which fails Validate: %v", s, l, err)
		}
		got, err := ParseLimit(l.String())
		if err != nil || got != l {
			t.Fatalf("ParseLimit(%q) round trip via %q = %+v, %v; want %+v", s, l.String(), got, err, l)
		}
	})
}

// TestLimitSize guards the field order that keeps a Limit, copied with
// every Decision, at five words.
func TestLimitSize(t *testing.T) {
	if got := unsafe.Sizeof(Limit{}); got > 5*unsafe.Sizeof(0) {
		t.Errorf("Sizeof(Limit{}) = %d, want at most 5 words", got)
	}
}
