package simulate

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/simulate/loggen"
)

// TestManyRules replays a rule set of 300 named rules (two limits each)
// and 100 descriptor domains: every line is checked against every rule,
// the report gives the replay's CPU per line, and the rules' sketches
// share one budget rather than taking 4096 keys each.
func TestManyRules(t *testing.T) {
	const rules, lines = 300, 400
	var y strings.Builder
	y.WriteString("rules:\n")
	for i := range rules {
		fmt.Fprintf(&y, "  - name: r%d\n    limits: [\"%d/min\", \"%d/h\"]\n", i, 5+i%50, 100+i)
	}
	for i := range 100 {
		fmt.Fprintf(&y, "  - domain: d%d\n    descriptors:\n      - key: remote_address\n        limits: [\"%d/min\"]\n", i, 10+i)
	}
	cfg, err := config.Parse("many.yaml", []byte(y.String()))
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if err := loggen.Write(&log, lines, loggen.Config{Seed: 5}); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Options{Config: Config{Rules: cfg}, Stdin: bytes.NewReader(log.Bytes()), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rules) != rules {
		t.Fatalf("%d rules reported, want %d", len(rep.Rules), rules)
	}
	for _, r := range rep.Rules {
		if r.Requests != lines {
			t.Fatalf("rule %s asked %d times, want once a line (%d)", r.Rule, r.Requests, lines)
		}
	}
	if rep.CPUSeconds <= 0 || rep.CPUPerLine <= 0 {
		t.Errorf("CPU %v s, %v µs a line: want the replay's cost reported", rep.CPUSeconds, rep.CPUPerLine)
	}
	t.Logf("%d rules: %.0f µs of CPU a line", rules, rep.CPUPerLine)

	top, sketch := (Config{}).sizes(rules)
	if top != defaultTop || sketch != minSketch {
		t.Errorf("sizes(%d) = %d, %d: want the default top and %d-key sketches", rules, top, sketch, minSketch)
	}
	if _, s := (Config{}).sizes(3); s != defaultSketch {
		t.Errorf("sizes(3) sketch = %d, want %d", s, defaultSketch)
	}
	if _, s := (Config{Sketch: 100_000}).sizes(rules); s != 100_000 {
		t.Errorf("an asked sketch size is kept: got %d", s)
	}
}

// TestTallyBudget checks that the rate tables of a replay's routes hold
// at most their shared budget of words, the requests of further keys
// counted as untallied, and that the budget comes back when the longest
// window ends. The rules of a route share a distribution per period: a's
// 5/min and b's 9/min count the same windows, in one table with a's 50/h.
func TestTallyBudget(t *testing.T) {
	r := replayerFor(t, "rules:\n  - name: a\n    limits: [\"5/min\", \"50/h\"]\n  - name: b\n    limits: [\"9/min\"]\n")
	rates := &r.paths[0].rates
	if len(r.paths) != 1 || len(rates.hists) != 2 || r.routes[0].rates[0] != r.routes[1].rates[0] || r.routes[0].rates[1] == rates.hists[0] {
		t.Fatalf("%d paths, %d distributions: want one path of two, a minute's shared by a and b", len(r.paths), len(rates.hists))
	}
	stride := rates.counts.stride
	budget := 10 * stride
	r.tallyWords = budget
	t0 := int64(1_700_000_000) * 1e9 / 3600e9 * 3600e9 // an hour's start
	// 40 keys, one request each, in one minute.
	for i := range 40 {
		r.paths[0].count(t0+int64(i)*1e9, "", uint64(1000+i))
		if n := rates.counts.n * stride; n > budget || n+r.tallyWords != budget {
			t.Fatalf("after %d keys: %d words held, %d left: want at most %d together", i+1, n, r.tallyWords, budget)
		}
	}
	for _, h := range rates.hists {
		if h.Untallied != 30 {
			t.Errorf("%d untallied of period %v, want the 30 requests of keys beyond the budget", h.Untallied, time.Duration(h.period))
		}
	}
	// An hour later every window has ended: the keys come back.
	rates.add(t0+3601e9, 1)
	if r.tallyWords != budget-stride {
		t.Errorf("after the hour's window ended, %d words left of the budget: want all but the new key's %d", r.tallyWords, budget-stride)
	}
}

// TestTallyBudgetManyPeriods checks the rate tables' bound where a key
// costs most: a route of 60 rules of 60 different periods, whose every
// key holds a slot of 32 words. Flooded with 5,000 keys, the table holds
// no more than the budget, its slots no more than four times it (at most
// half full, doubled when growing), every distribution counts the
// requests of the keys beyond it as untallied, and the keys counted
// before the budget ran out keep their counts.
func TestTallyBudgetManyPeriods(t *testing.T) {
	var rules strings.Builder
	rules.WriteString("rules:\n")
	for i := range 60 {
		fmt.Fprintf(&rules, "  - name: r%d\n    limits: [\"1000/%ds\"]\n", i, i+1)
	}
	r := replayerFor(t, rules.String())
	rates := &r.paths[0].rates
	if len(r.paths) != 1 || len(rates.hists) != 60 || rates.counts.stride != 32 {
		t.Fatalf("%d paths, %d distributions, %d words a key: want one path, 60, 32", len(r.paths), len(rates.hists), rates.counts.stride)
	}
	const budget = 1000 * 32 // words: a thousand keys
	r.tallyWords = budget
	t0 := int64(1_700_000_000) * 1e9
	for i := range 5000 {
		r.paths[0].count(t0, "", uint64(1_000_000+i))
	}
	held := rates.counts.n * rates.counts.stride
	if held > budget || held+r.tallyWords != budget || len(rates.counts.words) > 4*budget {
		t.Errorf("%d words held, %d left, %d allocated: want at most %d held, all accounted, at most %d allocated",
			held, r.tallyWords, len(rates.counts.words), budget, 4*budget)
	}
	for _, h := range rates.hists {
		if h.Untallied != 4000 {
			t.Fatalf("%d untallied of period %v, want the 4000 requests of keys beyond the budget", h.Untallied, time.Duration(h.period))
		}
	}
	// The keys counted before the budget ran out keep their counts.
	for i := range 1000 {
		s, _ := rates.counts.slot(uint64(1_000_000+i), false)
		if s == nil || count(s, 0) != 1 || count(s, 59) != 1 {
			t.Fatalf("key %d, counted before the flood: slot %v, want its request counted in every column", i, s)
		}
	}
}

// replayerFor returns a Replayer of the rules of text, closed when t ends.
func replayerFor(t *testing.T, text string) *Replayer {
	t.Helper()
	r, err := NewReplayer(context.Background(), Config{Rules: parseConfig(t, text)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
