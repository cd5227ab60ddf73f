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
)

// Limits returns the limits the report measures: 100 per minute under
// every algorithm, the sliding window counters with several bucket counts.
func Limits() []sluice.Limit {
	base := sluice.Limit{Rate: 100, Period: time.Minute}
	with := func(a sluice.Algorithm, buckets int, staggered bool) sluice.Limit {
		l := base
		l.Algorithm, l.Buckets, l.Staggered = a, buckets, staggered
		return l
	}
	return []sluice.Limit{
		base,
		with(sluice.FixedWindow, 0, false),
		with(sluice.FixedWindow, 0, true),
		with(sluice.SlidingWindow, 10, false),
		with(sluice.SlidingWindow, 60, false),
		with(sluice.ApproxSlidingWindow, 1, false),
		with(sluice.ApproxSlidingWindow, 10, false),
		with(sluice.ApproxSlidingWindow, 60, false),
		with(sluice.SlidingLog, 0, false),
	}
}

// Actor is the key of the single-actor traces.
const Actor = "actor"

// Run measures every limit of Limits on every trace of Traces for Actor,
// generated from seed, each in a fresh store from newStore, and returns
// the results in that order. It stops at the first error.
func Run(ctx context.Context, newStore NewStore, seed uint64) ([]Result, error) {
	var out []Result
	for _, l := range Limits() {
		for _, tr := range Traces(l, Actor, seed) {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			r, err := measureIn(ctx, newStore, l, tr)
			if err != nil {
				return out, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func measureIn(ctx context.Context, newStore NewStore, l sluice.Limit, tr Trace) (Result, error) {
	s, release, err := newStore()
	if err != nil {
		return Result{}, err
	}
	defer release()
	return Measure(ctx, s, l, tr)
}

// Label names l's algorithm as the report's first column does: the
// algorithm, its bucket count, "staggered", and a burst other than Rate.
func Label(l sluice.Limit) string {
	s := l.Algorithm.String()
	switch {
	case l.Algorithm == sluice.SlidingWindow || l.Algorithm == sluice.ApproxSlidingWindow:
		s += " G=" + strconv.Itoa(l.BucketCount())
	case l.Algorithm == sluice.FixedWindow && l.Staggered:
		s += " staggered"
	case l.Algorithm == sluice.GCRA && l.MaxBurst() != l.Rate:
		s += " burst " + strconv.Itoa(l.MaxBurst())
	}
	return s
}

var header = []string{"algorithm", "trace", "admitted", "max in window", "at request times", "limit", "bound", "over-admitted", "under-admitted", "over bound"}

// fullHeader is the column of takes failed with ErrStoreFull, shown only
// when some result has one.
const fullHeader = "store full"

// table returns the header and rows of rs.
func table(rs []Result) (head []string, rows [][]string) {
	return tableOf(rs, header, func(r Result) []string {
		return []string{
			Label(r.Limit),
			r.Trace,
			fmt.Sprintf("%d/%d", r.Admitted, r.Requests),
			strconv.Itoa(r.MaxInWindow),
			strconv.Itoa(r.MaxAtRequestTimes),
			strconv.Itoa(r.Limit.Rate),
			strconv.Itoa(r.Bound),
			strconv.Itoa(r.Over),
			strconv.Itoa(r.Under),
			strconv.Itoa(r.OverBound),
		}
	})
}

var evictionHeader = []string{"algorithm", "case", "admitted", "exact admits", "over-admitted", "under-admitted", "max in window", "bound", "over bound"}

// evictionTable returns the header and rows of results of RunEviction.
func evictionTable(rs []Result) (head []string, rows [][]string) {
	return tableOf(rs, evictionHeader, func(r Result) []string {
		return []string{
			Label(r.Limit),
			r.Trace,
			fmt.Sprintf("%d/%d", r.Admitted, r.Requests),
			strconv.Itoa(r.Exact),
			strconv.Itoa(r.OverExact),
			strconv.Itoa(r.UnderExact),
			strconv.Itoa(r.MaxInWindow),
			strconv.Itoa(r.Bound),
			strconv.Itoa(r.OverBound),
		}
	})
}

// tableOf returns header and a row of cells per result, with the column
// of takes failed with ErrStoreFull when some result has one.
func tableOf(rs []Result, header []string, cells func(Result) []string) (head []string, rows [][]string) {
	full := false
	for _, r := range rs {
		full = full || r.Full > 0
	}
	head = header
	if full {
		head = append(head[:len(head):len(head)], fullHeader)
	}
	for _, r := range rs {
		row := cells(r)
		if full {
			row = append(row, strconv.Itoa(r.Full))
		}
		rows = append(rows, row)
	}
	return head, rows
}

// WriteTable writes rs as an aligned text table, one row per result.
func WriteTable(w io.Writer, rs []Result) error {
	head, rows := table(rs)
	return writeText(w, head, rows)
}

// WriteMarkdown writes rs as a Markdown table, one row per result.
func WriteMarkdown(w io.Writer, rs []Result) error {
	head, rows := table(rs)
	return writeMarkdown(w, head, rows)
}

// WriteEvictionTable writes results of RunEviction as an aligned text
// table: per limit and case, the takes admitted, what the algorithm with
// unbounded memory admits on the same trace in its own run (exact
// admits), the takes the store allowed that the algorithm fed the
// store's admitted takes denies (over-admitted) and the reverse
// (under-admitted), the most units in a window, the stated bound, and the
// units admitted beyond it (over bound).
func WriteEvictionTable(w io.Writer, rs []Result) error {
	head, rows := evictionTable(rs)
	return writeText(w, head, rows)
}

// WriteEvictionMarkdown writes results of RunEviction as a Markdown table
// (see WriteEvictionTable).
func WriteEvictionMarkdown(w io.Writer, rs []Result) error {
	head, rows := evictionTable(rs)
	return writeMarkdown(w, head, rows)
}

func writeText(w io.Writer, head []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, cells := range append([][]string{head}, rows...) {
		// A trailing tab ends the last cell, so that it is aligned too.
		fmt.Fprint(tw, strings.Join(cells, "\t")+"\t\n")
	}
	return tw.Flush()
}

func writeMarkdown(w io.Writer, head []string, rows [][]string) error {
	var b strings.Builder
	b.WriteString("| " + strings.Join(head, " | ") + " |\n|")
	for i := range head {
		if i < 2 {
			b.WriteString(" --- |")
		} else {
			b.WriteString(" ---: |")
		}
	}
	b.WriteString("\n")
	for _, row := range rows {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
