package rules

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// fakeGuard judges actors by a fixed table and records the denials it is
// told of.
type fakeGuard struct {
	verdicts map[string]Verdict
	mu       sync.Mutex
	judged   []string
	denied   []string
}

func (g *fakeGuard) Judge(_ context.Context, ru *Rule, actor string) Verdict {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.judged = append(g.judged, ru.ID+"/"+actor)
	return g.verdicts[actor]
}

func (g *fakeGuard) Denied(_ context.Context, ru *Rule, actor string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.denied = append(g.denied, ru.ID+"/"+actor)
}

// TestGuard checks how the engine applies a Guard: to the keys of named
// rules only, before their limits, with statuses that no shadow mode
// softens, and with each take the limits deny reported as a strike.
func TestGuard(t *testing.T) {
	const yml = `rules:
  - name: login
    limits: ["1/min"]
  - name: dry
    shadow: true
    limits: ["1/min"]
  - domain: edge
    descriptors:
      - key: key
        limits: ["1/min"]
`
	ban := 5 * time.Minute
	g := &fakeGuard{verdicts: map[string]Verdict{
		"friend": {Action: Exempt},
		"foe":    {Action: Refuse},
		"thief":  {Action: Ban, Left: ban},
	}}
	e, _, _ := newEngine(t, yml)
	e.guard = g
	check := func(r Request) Result {
		t.Helper()
		res, err := e.Check(context.Background(), r)
		if err != nil {
			t.Fatalf("Check(%+v) = %v", r, err)
		}
		return res
	}
	tests := []struct {
		rule, actor string
		op          sluice.Op
		skip        bool
		allowed     bool
		guard       Action
		retry       time.Duration
	}{
		{"login", "friend", sluice.OpTake, false, true, Exempt, 0},
		{"login", "friend", sluice.OpTake, false, true, Exempt, 0}, // nothing was counted
		{"login", "foe", sluice.OpTake, false, false, Refuse, 0},
		{"login", "thief", sluice.OpPeek, false, false, Ban, ban},
		{"dry", "thief", sluice.OpTake, false, false, Ban, ban}, // shadow mode is the limits'
		{"login", "thief", sluice.OpTake, true, true, Pass, 0},  // SkipGuard: the limits decide
		{"login", "bob", sluice.OpTake, false, true, Pass, 0},
		{"login", "bob", sluice.OpTake, false, false, Pass, time.Minute}, // a strike
		{"login", "bob", sluice.OpPeek, false, false, Pass, time.Minute}, // a peek is none
		{"dry", "bob", sluice.OpTake, false, true, Pass, 0},
		{"dry", "bob", sluice.OpTake, false, true, Pass, time.Minute}, // shadowed: no strike
		{"edge", "foe", sluice.OpTake, false, true, Pass, 0},          // descriptors have no actor
	}
	for i, tt := range tests {
		res := check(Request{Domain: tt.rule, Descriptors: []Descriptor{Key(tt.actor)}, Op: tt.op, SkipGuard: tt.skip})
		st := res.Statuses[0]
		if res.Allowed != tt.allowed || st.Guard != tt.guard || st.Decision.RetryAfter != tt.retry {
			t.Errorf("%d: Check(%s, %s, %v) = allowed %v, guard %v, RetryAfter %v; want %v, %v, %v",
				i, tt.rule, tt.actor, tt.op, res.Allowed, st.Guard, st.Decision.RetryAfter, tt.allowed, tt.guard, tt.retry)
		}
	}
	if got, want := fmt.Sprint(g.denied), "[login/bob]"; got != want {
		t.Errorf("strikes = %s, want %s", got, want)
	}
	// A reset is never judged.
	n := len(g.judged)
	check(Request{Domain: "login", Descriptors: []Descriptor{Key("thief")}, Op: sluice.OpReset})
	if len(g.judged) != n {
		t.Errorf("a reset was judged: %v", g.judged[n:])
	}
}
