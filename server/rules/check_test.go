package rules

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// checkIntoRules are a named rule and a domain of two descriptors, small
// enough that a few requests meet denials, refunds and the rest.
const checkIntoRules = `rules:
  - name: api
    limits: ["2/min"]
  - domain: edge
    descriptors:
      - key: remote_address
        rate_limit: {unit: minute, requests_per_unit: 3}
      - key: path
        rate_limit: {unit: minute, requests_per_unit: 1}
`

// view renders res with its rules named by ID, to compare the results
// of engines built alike.
func view(res Result) string {
	id := func(r *Rule) string {
		if r == nil {
			return "-"
		}
		return r.ID
	}
	var b strings.Builder
	fmt.Fprintf(&b, "allowed=%v", res.Allowed)
	for _, st := range res.Statuses {
		rest := st
		rest.Rule, rest.Replaced = nil, nil
		fmt.Fprintf(&b, " [%s %s %+v]", id(st.Rule), id(st.Replaced), rest)
	}
	return b.String()
}

// TestCheckInto checks that CheckInto answers as Check does, into
// statuses on the caller's stack and into a Result reused from request
// to request (zero after an error), over a sequence of takes, denials,
// refunds, errors, peeks and resets.
func TestCheckInto(t *testing.T) {
	c, err := config.Parse("checkinto.yaml", []byte(checkIntoRules))
	if err != nil {
		t.Fatal(err)
	}
	byCheck, _, _ := engineFor(t, c)
	onStack, _, _ := engineFor(t, c)
	reusing, _, _ := engineFor(t, c)
	edge := []Descriptor{desc("remote_address=10.0.0.1"), desc("path=/a")}
	steps := []Request{
		Named("api", "10.0.0.1"), Named("api", "10.0.0.1"), Named("api", "10.0.0.1"),
		{Domain: "edge", Descriptors: edge}, {Domain: "edge", Descriptors: edge},
		{Domain: "edge", Descriptors: edge, Op: sluice.OpPeek},
		{Domain: "nowhere", Descriptors: edge},
		{Domain: "edge", Descriptors: edge, Op: sluice.OpReset},
		{Domain: "edge", Descriptors: edge[:1]}, Named("api", "10.0.0.2"),
	}
	ctx := context.Background()
	reused := Result{Statuses: make([]Status, 8)} // stale statuses, more than needed
	for i, r := range steps {
		want, wantErr := byCheck.Check(ctx, r)
		var sts [2]Status
		got := Result{Statuses: sts[:0]}
		err := onStack.CheckInto(ctx, r, &got)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || view(got) != view(want) {
			t.Errorf("step %d: CheckInto(stack) = %s, %v, want %s, %v", i, view(got), err, view(want), wantErr)
		}
		err = reusing.CheckInto(ctx, r, &reused)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || view(reused) != view(want) {
			t.Errorf("step %d: CheckInto(reused) = %s, %v, want %s, %v", i, view(reused), err, view(want), wantErr)
		}
		if err != nil && !reflect.DeepEqual(reused, Result{}) {
			t.Errorf("step %d: CheckInto(reused) error %v left %s, want the zero Result", i, err, view(reused))
		}
	}
}

// TestCheckIntoAllocs checks that a check of a named rule into statuses
// on the caller's stack allocates nothing: the engine keeps nothing of
// the Result, so escape analysis leaves it, and the request, on the
// stack (a change that stores them would cost every API an allocation).
func TestCheckIntoAllocs(t *testing.T) {
	e, _, _ := newEngine(t, checkIntoRules)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		var sts [1]Status
		res := Result{Statuses: sts[:0]}
		d := [1]Descriptor{Key("10.0.0.1")}
		if err := e.CheckInto(ctx, Request{Domain: "api", Descriptors: d[:], Op: sluice.OpPeek}, &res); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("CheckInto into stack statuses: %v allocations, want 0", allocs)
	}
}
