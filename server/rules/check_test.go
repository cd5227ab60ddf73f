package rules

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/store/memory"
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

// TestBoundDecidesAsStore replays one sequence of checks through an
// engine on the memory store, which binds its rules (see decideOne), and
// through one on a memory store behind a wrapper that hides its Bind:
// every result and error must be the same, for takes and peeks of GCRA,
// window and two-limit rules on a time grid, and for times outside the
// range a Bound takes without the full check.
func TestBoundDecidesAsStore(t *testing.T) {
	c, err := config.Parse("bound.yaml", []byte(`rules:
  - name: login
    limits: ["5/min", "20/h"]
  - name: api
    limits: ["100/s burst 200"]
  - name: signup
    limits: ["3/h sliding", "10/day"]
  - name: form
    limits: ["4/min fixed"]
`))
	if err != nil {
		t.Fatal(err)
	}
	type wrapped struct{ sluice.Store } // a Store, not a Binder
	var engines [2]*Engine
	clk := &clock{t: start}
	for i := range engines {
		mem := memory.New(memory.Config{SweepInterval: -1})
		t.Cleanup(func() { mem.Close() })
		var st sluice.Store = mem
		if i == 1 {
			st = wrapped{mem}
		}
		if engines[i], err = New(Config{Store: st, Rules: c.Rules, Clock: clk.now}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"login", "api", "signup", "form"} {
		if engines[0].Rule(name).bound == nil || engines[1].Rule(name).bound != nil {
			t.Fatalf("rule %s: bound %v and %v, want the memory store's only", name, engines[0].Rule(name).bound, engines[1].Rule(name).bound)
		}
	}
	ctx := context.Background()
	step := func(i int, r Request) (allowed bool, err error) {
		t.Helper()
		var got [2]Result
		var errs [2]error
		for k, e := range engines {
			got[k], errs[k] = e.Check(ctx, r)
		}
		if fmt.Sprint(errs[0]) != fmt.Sprint(errs[1]) || view(got[0]) != view(got[1]) {
			t.Fatalf("step %d (%s at %v): bound %s, %v; store %s, %v", i, r.Domain, clk.t, view(got[0]), errs[0], view(got[1]), errs[1])
		}
		return got[0].Allowed, errs[0]
	}
	names := []string{"login", "api", "signup", "form"}
	denied := 0
	for i := range 3000 {
		clk.t = start.Add(time.Duration(i) * 700 * time.Millisecond)
		r := Named(names[i%4], fmt.Sprintf("10.0.0.%d", i%5))
		if i%7 == 0 {
			r.Op = sluice.OpPeek
		}
		if allowed, _ := step(i, r); !allowed {
			denied++
		}
	}
	if denied < 300 {
		t.Errorf("%d of 3000 checks denied: the sequence does not exercise the limits", denied)
	}
	for i, at := range []time.Time{
		time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2250, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(-1, 0),
	} {
		clk.t = at
		for _, name := range names {
			if _, err := step(i, Named(name, "10.0.0.9")); (err != nil) != (at.Year() > 2200 || at.Unix() < 0) {
				t.Errorf("%s at %v: error %v", name, at, err)
			}
		}
	}
}
