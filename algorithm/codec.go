package algorithm

import (
	"encoding/binary"
	"fmt"

	"github.com/sluicehq/sluice"
)

// codecVersion is the first byte of every encoded state.
const codecVersion = 1

// maxWord bounds every word of a valid state. Times are at most year 2200
// (7.3e18 ns, see sluice.Request.Validate); adding a period and a burst
// (each at most sluice.MaxPeriod, 3.2e17) to a word below 8e18 cannot
// overflow an int64, so a corrupt value cannot wrap round to "allowed".
const maxWord = 8_000_000_000_000_000_000

// AppendState appends the binary form of state s of limit l to dst and
// returns the extended slice. The form is a version byte, the algorithm,
// the number of words, and each word as a zigzag varint of its difference
// from the word before it (timestamps and window indexes stay short). An
// empty state (all zero) encodes in 3 + len(s) bytes.
func AppendState(dst []byte, l sluice.Limit, s []int64) []byte {
	dst = append(dst, codecVersion, byte(l.Algorithm))
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	prev := int64(0)
	for _, w := range s {
		dst = binary.AppendVarint(dst, w-prev)
		prev = w
	}
	return dst
}

// DecodeState decodes the form AppendState writes into a state for l,
// checking every invariant the algorithms rely on, so that no stored value
// can make them panic or misbehave. A sliding log encoded for another rate
// is fitted to l (see Fit). Errors wrap sluice.ErrCorruptState.
func DecodeState(l sluice.Limit, b []byte) ([]int64, error) {
	bad := func(why string) ([]int64, error) {
		return nil, fmt.Errorf("%w: %s", sluice.ErrCorruptState, why)
	}
	if len(b) < 3 || b[0] != codecVersion {
		return bad("unknown encoding")
	}
	if sluice.Algorithm(b[1]) != l.Algorithm {
		return bad(fmt.Sprintf("state of %v, limit is %v", sluice.Algorithm(b[1]), l.Algorithm))
	}
	n, k := binary.Uvarint(b[2:])
	if k <= 0 || n > uint64(sluice.MaxLogRate+1) || n > uint64(len(b)) {
		return bad("bad length")
	}
	b = b[2+k:]
	s := make([]int64, n)
	prev := int64(0)
	for i := range s {
		d, k := binary.Varint(b)
		if k <= 0 {
			return bad("truncated")
		}
		b = b[k:]
		prev += d
		s[i] = prev
	}
	if len(b) != 0 {
		return bad("trailing bytes")
	}
	if l.Algorithm == sluice.SlidingLog {
		s = Fit(l, s)
	}
	if err := Verify(l, s); err != nil {
		return nil, err
	}
	return s, nil
}

// Verify reports whether s is a state the algorithms of l can use: the
// right length, no negative count, and for a sliding log a slot index in
// range and timestamps in order, and every word in [0, 8e18] so no
// arithmetic on it can overflow. Errors wrap sluice.ErrCorruptState.
func Verify(l sluice.Limit, s []int64) error {
	bad := func(why string) error { return fmt.Errorf("%w: %v: %s", sluice.ErrCorruptState, l.Algorithm, why) }
	if len(s) != Words(l) {
		return bad(fmt.Sprintf("%d words, want %d", len(s), Words(l)))
	}
	for _, w := range s {
		if w < 0 || w > maxWord {
			return bad("value out of range")
		}
	}
	if l.Algorithm == sluice.SlidingLog {
		if s[0] >= int64(l.Rate) {
			return bad("slot out of range")
		}
		prev := int64(0)
		for k := range l.Rate {
			ts := *logAt(s, k)
			if ts < prev {
				return bad("timestamps out of order")
			}
			prev = ts
		}
	}
	return nil
}

// Fit returns s resized for l when l's state size changed but its meaning
// did not: a sliding log whose rate changed keeps its newest timestamps.
// Any other state is returned as it is.
func Fit(l sluice.Limit, s []int64) []int64 {
	if l.Algorithm != sluice.SlidingLog || len(s) == Words(l) || len(s) < 2 {
		return s
	}
	old := len(s) - 1
	if s[0] < 0 || s[0] >= int64(old) {
		return s // Verify will reject it
	}
	out := make([]int64, Words(l))
	keep := min(old, l.Rate)
	for k := range keep { // copy the newest keep timestamps, oldest first
		out[1+l.Rate-keep+k] = *logAt(s, old-keep+k)
	}
	return out
}
