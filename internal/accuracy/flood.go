package accuracy

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

// A FloodCase floods a memory store of MaxBytes with distinct keys of
// KeyLen bytes, all of one rule limited by Limit, each spending its whole
// allowance within one window: the attacker's best case against fresh
// actors of the rule, whom a store that must forget keys may charge for
// the keys it forgot.
type FloodCase struct {
	Limit    sluice.Limit
	MaxBytes int64
	KeyLen   int
}

// A FloodResult is what a FloodCase found.
type FloodResult struct {
	FloodCase
	// Threshold is the fewest distinct keys, to within Step, after which
	// 1% or more of fresh actors of the flooded rule are refused; 0 if
	// none were, up to Keys.
	Threshold int
	// Held is how many states the store held then (or at the end).
	Held int
	// Keys is how many keys the flood sent; Step how often it probed.
	Keys, Step int
	// Other is how many fresh actors of another rule with the same limit
	// were refused at the end of the flood, of Probes.
	Other, Probes int
}

// floodProbes is how many fresh actors each probe asks about.
const floodProbes = 2000

// Flood runs c: it sends keys distinct keys, each taking the limit's
// whole burst, and every step keys peeks at floodProbes fresh actors of
// the flooded rule (a peek changes nothing); it stops at the first probe
// that finds 1% or more of them refused. Then it peeks at as many fresh
// actors of another rule with the same limit.
func Flood(ctx context.Context, c FloodCase, keys, step int) (FloodResult, error) {
	s := memory.New(memory.Config{MaxBytes: c.MaxBytes, SweepInterval: -1})
	defer s.Close()
	res := FloodResult{FloodCase: c, Keys: keys, Step: step, Probes: floodProbes}
	limits := []sluice.Limit{c.Limit}
	now := Start
	take := sluice.Request{Prefix: "sluice:strict:", Limits: limits, Cost: c.Limit.MaxBurst()}
	for i := 1; i <= keys; i++ {
		take.Key, take.Now = floodKey(i, c.KeyLen), now
		if _, err := s.Decide(ctx, take); err != nil {
			return res, err
		}
		now = now.Add(time.Microsecond)
		if i%step != 0 && i != keys {
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		refused, err := floodProbe(ctx, s, "sluice:strict:", limits, now)
		if err != nil {
			return res, err
		}
		if refused*100 >= floodProbes {
			res.Threshold = i
			break
		}
	}
	res.Held = s.Len()
	var err error
	res.Other, err = floodProbe(ctx, s, "sluice:login:", limits, now)
	return res, err
}

// floodKey returns the ith key of a flood, of keyLen bytes (at least 8):
// its number in base 36, padded.
func floodKey(i, keyLen int) string {
	n := strconv.FormatInt(int64(i), 36)
	return strings.Repeat("k", max(keyLen-8, 0)) + strings.Repeat("0", max(8-len(n), 0)) + n
}

// FloodCases returns the cases of the report: GCRA, the default, at 3 an
// hour (a login form's limit), at 1 MiB, 32 MiB and the default 256 MiB,
// with keys of 24 bytes (an address with a little more) and at 256 MiB
// of 128 (the longest a Limiter passes on whole); the other algorithms
// at 32 MiB.
func FloodCases() []FloodCase {
	l := sluice.Limit{Rate: 3, Period: time.Hour}
	with := func(a sluice.Algorithm) sluice.Limit {
		w := l
		w.Algorithm = a
		return w
	}
	return []FloodCase{
		{Limit: l, MaxBytes: 1 << 20, KeyLen: 24},
		{Limit: l, MaxBytes: 32 << 20, KeyLen: 24},
		{Limit: l, MaxBytes: 256 << 20, KeyLen: 24},
		{Limit: l, MaxBytes: 256 << 20, KeyLen: 128},
		{Limit: with(sluice.FixedWindow), MaxBytes: 32 << 20, KeyLen: 24},
		{Limit: with(sluice.SlidingWindow), MaxBytes: 32 << 20, KeyLen: 24},
		{Limit: with(sluice.SlidingLog), MaxBytes: 32 << 20, KeyLen: 24},
	}
}

// floodProbe returns how many of floodProbes fresh actors of prefix a
// peek of 1 finds refused.
func floodProbe(ctx context.Context, s sluice.Store, prefix string, limits []sluice.Limit, now time.Time) (int, error) {
	refused := 0
	for j := range floodProbes {
		d, err := s.Decide(ctx, sluice.Request{Prefix: prefix, Key: "fresh-" + strconv.Itoa(j), Limits: limits, Op: sluice.OpPeek, Cost: 1, Now: now})
		if err != nil {
			return 0, err
		}
		if !d.Allowed {
			refused++
		}
	}
	return refused, nil
}

// WriteFloodTable writes rs as a table: the limit, MaxBytes, key length,
// the threshold (with "> Keys" where none was found), the states held,
// and the fresh actors of another rule refused.
func WriteFloodTable(w io.Writer, rs []FloodResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "limit\tmax_bytes\tkey bytes\tkeys before 1% of fresh actors refused\tstates held\tanother rule's fresh actors refused")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d MiB\t%d\t%s\t%d\t%d/%d\n", r.Limit, r.MaxBytes>>20, r.KeyLen, threshold(r), r.Held, r.Other, r.Probes)
	}
	return tw.Flush()
}

// WriteFloodMarkdown writes rs as WriteFloodTable does, in Markdown.
func WriteFloodMarkdown(w io.Writer, rs []FloodResult) error {
	fmt.Fprintln(w, "| limit | max_bytes | key bytes | keys before 1% of fresh actors refused | states held | another rule's fresh actors refused |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rs {
		if _, err := fmt.Fprintf(w, "| %s | %d MiB | %d | %s | %d | %d/%d |\n", r.Limit, r.MaxBytes>>20, r.KeyLen, threshold(r), r.Held, r.Other, r.Probes); err != nil {
			return err
		}
	}
	return nil
}

// threshold formats r's threshold, to within its step.
func threshold(r FloodResult) string {
	if r.Threshold == 0 {
		return "> " + thousands(r.Keys)
	}
	return fmt.Sprintf("%s–%s", thousands(r.Threshold-r.Step+1), thousands(r.Threshold))
}

// thousands formats n with commas between groups of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// RunFlood runs every case of cs, sending up to 80,000 keys per MiB of
// MaxBytes and probing every 1,000 per MiB.
func RunFlood(ctx context.Context, cs []FloodCase) ([]FloodResult, error) {
	var out []FloodResult
	for _, c := range cs {
		mib := int(max(c.MaxBytes>>20, 1))
		r, err := Flood(ctx, c, 80_000*mib, 1000*mib)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}
