package algorithm

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestDecodeStateRejects(t *testing.T) {
	l := sluice.Limit{Rate: 3, Period: time.Second, Algorithm: sluice.SlidingLog}
	good := AppendState(nil, l, []int64{0, 10, 20, 30})
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"version", append([]byte{9}, good[1:]...)},
		{"algorithm", append([]byte{codecVersion, byte(sluice.GCRA)}, good[2:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(slices.Clone(good), 0)},
		{"huge length", []byte{codecVersion, byte(sluice.SlidingLog), 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"slot out of range", AppendState(nil, l, []int64{3, 10, 20, 30})},
		{"unsorted", AppendState(nil, l, []int64{0, 30, 20, 10})},
		{"negative count", AppendState(nil, sluice.Limit{Rate: 3, Period: time.Second, Algorithm: sluice.FixedWindow}, []int64{5, -1})},
		{"overflowing time", AppendState(nil, l, []int64{0, 1, 2, math.MaxInt64 - 5})},
	}
	for _, tt := range tests {
		lim := l
		if tt.name == "negative count" {
			lim.Algorithm = sluice.FixedWindow
		}
		if s, err := DecodeState(lim, tt.b); !errors.Is(err, sluice.ErrCorruptState) {
			t.Errorf("%s: DecodeState = %v, %v; want ErrCorruptState", tt.name, s, err)
		}
	}
	if _, err := DecodeState(l, good); err != nil {
		t.Errorf("DecodeState(good) = %v", err)
	}
}

func TestFitSlidingLog(t *testing.T) {
	small := sluice.Limit{Rate: 2, Period: time.Second, Algorithm: sluice.SlidingLog}
	big := sluice.Limit{Rate: 4, Period: time.Second, Algorithm: sluice.SlidingLog}
	// A ring of 4 whose oldest slot is 2: ring order 5, 6, 7, 8.
	s := []int64{2, 7, 8, 5, 6}
	if got, want := Fit(small, s), []int64{0, 7, 8}; !slices.Equal(got, want) {
		t.Errorf("Fit(rate 2, %v) = %v, want %v", s, got, want)
	}
	if got, want := Fit(big, []int64{1, 9, 4}), []int64{0, 0, 0, 4, 9}; !slices.Equal(got, want) {
		t.Errorf("Fit(rate 4, [1 9 4]) = %v, want %v", got, want)
	}
}

// FuzzDecodeState: any bytes decode to an error or to a state every
// algorithm can use without panicking, and valid states round-trip.
func FuzzDecodeState(f *testing.F) {
	for _, l := range testLimits {
		s := make([]int64, Words(l))
		Take(l, s, t0, 1)
		f.Add(byte(l.Algorithm), AppendState(nil, l, s))
	}
	f.Fuzz(func(t *testing.T, which byte, b []byte) {
		l := testLimits[int(which)%len(testLimits)]
		s, err := DecodeState(l, b)
		if err != nil {
			if !errors.Is(err, sluice.ErrCorruptState) {
				t.Fatalf("DecodeState error %v does not wrap ErrCorruptState", err)
			}
			return
		}
		for _, now := range []int64{t0, t0 + int64(time.Hour), 1} {
			Check(l, s, now, 1)
			d := Take(l, s, now, l.MaxBurst())
			Refund(l, s, now, now, 1)
			_ = d
		}
		got, err := DecodeState(l, AppendState(nil, l, s))
		if err != nil || !slices.Equal(got, s) {
			t.Fatalf("round trip = %v, %v; want %v", got, err, s)
		}
	})
}
