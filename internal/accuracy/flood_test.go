package accuracy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestFlood floods a 1 MiB memory store with distinct keys of one rule,
// each spending its whole allowance, under every algorithm, well past
// what the store remembers, and holds it to what was measured: no fresh
// actor of another rule with the same limit is ever refused, and for
// GCRA (the default), at least 45,000 keys are needed before 1% of the
// flooded rule's fresh actors are (47,000-48,000 measured; `sluice
// accuracy -flood` gives the figures up to 256 MiB).
func TestFlood(t *testing.T) {
	var cs []FloodCase
	for _, l := range EvictionLimits(3) {
		l.Period = time.Hour
		cs = append(cs, FloodCase{Limit: l, MaxBytes: 1 << 20, KeyLen: 24})
	}
	for _, c := range cs {
		t.Run(Label(c.Limit), func(t *testing.T) {
			t.Parallel()
			r, err := Flood(context.Background(), c, 100_000, 1000)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			if err := WriteFloodTable(&b, []FloodResult{r}); err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + b.String())
			if r.Other != 0 {
				t.Errorf("%d of %d fresh actors of another rule refused after the flood, want 0", r.Other, r.Probes)
			}
			if r.Threshold == 0 {
				t.Errorf("no probe found 1%% of the flooded rule's fresh actors refused after %d keys: the flood is too small to test", r.Keys)
			}
			if c.Limit.Algorithm == sluice.GCRA && r.Threshold < 45_000 {
				t.Errorf("1%% of fresh actors refused after %d keys, want at least 45,000", r.Threshold)
			}
		})
	}
}
