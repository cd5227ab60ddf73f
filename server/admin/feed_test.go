package admin

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/wire"
)

// TestFeed checks that a snapshot is encoded once for every dashboard,
// that a slow dashboard keeps only the latest, and that the streams are
// bounded.
func TestFeed(t *testing.T) {
	f := NewFeed()
	if f.Watched() {
		t.Fatal("a new feed is watched")
	}
	var chs []chan []byte
	for range maxStreams {
		ch, ok := f.subscribe()
		if !ok {
			t.Fatalf("subscription %d refused, want %d", len(chs)+1, maxStreams)
		}
		chs = append(chs, ch)
	}
	if _, ok := f.subscribe(); ok {
		t.Errorf("subscription %d accepted: want at most %d", maxStreams+1, maxStreams)
	}
	for i := range 3 {
		if err := f.Publish(&Snapshot{Time: time.Unix(int64(i), 0).UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	first := <-chs[0]
	if !strings.HasPrefix(string(first), "event: snapshot\ndata: {\"time\":\"1970-01-01T00:00:02Z\"") || !strings.HasSuffix(string(first), "\n\n") {
		t.Errorf("event = %q, want the latest snapshot as an SSE event", first)
	}
	for i, ch := range chs[1:] {
		if ev := <-ch; &ev[0] != &first[0] {
			t.Fatalf("dashboard %d got its own encoding: want one shared by all", i+1)
		}
		if len(ch) != 0 {
			t.Fatalf("dashboard %d has %d snapshots queued, want only the latest", i+1, len(ch))
		}
	}
	for _, ch := range chs {
		f.unsubscribe(ch)
	}
	if f.Watched() {
		t.Error("watched after every dashboard left")
	}
	late, _ := f.subscribe()
	if ev := <-late; &ev[0] != &first[0] {
		t.Error("a dashboard that opens does not start with the latest snapshot")
	}
}

// TestEncodeBounded: a snapshot of many rules whose top keys are markup
// and whose bans give long reasons of markup (which JSON escapes six
// times over) is trimmed to fit an event, top keys first, then rules,
// and says so; one that fits is left whole.
func TestEncodeBounded(t *testing.T) {
	markup := strings.Repeat("<", 128)
	big := func(rules int) *Snapshot {
		s := &Snapshot{Times: []int64{1}}
		for i := range rules {
			r := RuleLive{Name: fmt.Sprintf("rule-%03d", i), Allowed: []float64{1}, Denied: []float64{1}, Estimated: []float64{0}, Banned: []float64{1}, DenyList: []float64{0}}
			for k := range 10 {
				ban := &wire.Ban{Jail: "abuse", Key: markup, Reason: strings.Repeat("\x01", 256)}
				r.Top = append(r.Top, TopKey{Key: fmt.Sprintf("%s%d", markup, k), State: "banned", Ban: ban})
			}
			s.Rules = append(s.Rules, r)
		}
		return s
	}
	for _, tt := range []struct {
		rules          int
		trimmed        bool
		rulesLeftOut   bool
		maxTopsPerRule int
	}{
		{1, false, false, 10},
		{20, true, false, 10},
		{500, true, true, 0},
	} {
		s := big(tt.rules)
		data, err := Encode(s, MaxEvent)
		if err != nil {
			t.Fatal(err)
		}
		var back Snapshot
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		tops := 0
		for _, r := range back.Rules {
			tops = max(tops, len(r.Top))
		}
		if len(data) > MaxEvent || back.Trimmed != tt.trimmed || (back.RulesLeftOut > 0) != tt.rulesLeftOut ||
			len(back.Rules)+back.RulesLeftOut != tt.rules || tops > tt.maxTopsPerRule {
			t.Errorf("%d rules: %d bytes (at most %d), trimmed %v, %d rules and %d left out, at most %d top keys a rule",
				tt.rules, len(data), MaxEvent, back.Trimmed, len(back.Rules), back.RulesLeftOut, tops)
		}
	}
}
