package notify_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/notify"
)

func seqs(p notify.Page) []uint64 {
	var out []uint64
	for _, e := range p.Entries {
		out = append(out, e.Seq)
	}
	return out
}

// TestTrailBounds: beyond its count or bytes, a trail drops its oldest
// entries and counts them.
func TestTrailBounds(t *testing.T) {
	for _, tc := range []struct {
		name              string
		c                 notify.TrailConfig
		reason            int // bytes of each event's reason
		add               int
		wantHeld, maxHeld int
	}{
		{"count", notify.TrailConfig{MaxEntries: 100}, 10, 1000, 100, 100},
		{"bytes", notify.TrailConfig{MaxBytes: 64 << 10}, 400, 1000, 0, (64 << 10) / 600},
		{"under both", notify.TrailConfig{}, 10, 1000, 1000, 1000},
	} {
		tr := notify.NewTrail(tc.c)
		for i := range tc.add {
			tr.Add(notify.NewEvent(notify.Ban, guard.Ban{Jail: "j", Key: "k", Reason: strings.Repeat("r", tc.reason)}, "me", t0.Add(time.Duration(i)*time.Second)))
		}
		held, evicted := tr.Len()
		if held > tc.maxHeld || tc.wantHeld > 0 && held != tc.wantHeld || int(evicted) != tc.add-held {
			t.Errorf("%s: holds %d, evicted %d; want at most %d, the rest evicted", tc.name, held, evicted, tc.maxHeld)
		}
		p := tr.Page(0, time.Time{}, 0)
		if len(p.Entries) != min(held, notify.MaxPage) || p.Entries[len(p.Entries)-1].Seq != uint64(tc.add) || p.Evicted != evicted {
			t.Errorf("%s: Page(0) = %d entries up to %d, evicted %d", tc.name, len(p.Entries), p.Next, p.Evicted)
		}
	}
}

// TestTrailPage: after, since and limit select entries, oldest first.
func TestTrailPage(t *testing.T) {
	tr := notify.NewTrail(notify.TrailConfig{MaxEntries: 5})
	for i := range 8 { // 1-3 evicted
		tr.Add(notify.NewEvent(notify.Lift, guard.Ban{Jail: "j", Key: "k"}, "me", t0.Add(time.Duration(i)*time.Minute)))
	}
	for _, tc := range []struct {
		after    uint64
		since    time.Duration
		limit    int
		want     []uint64
		wantNext uint64
	}{
		{0, 0, 0, []uint64{4, 5, 6, 7, 8}, 8},
		{5, 0, 0, []uint64{6, 7, 8}, 8},
		{8, 0, 0, nil, 8},
		{100, 0, 0, nil, 100},
		{0, 0, 2, []uint64{4, 5}, 5},
		{5, 0, 2, []uint64{6, 7}, 7},
		{0, 6 * time.Minute, 0, []uint64{7, 8}, 8},
	} {
		since := time.Time{}
		if tc.since > 0 {
			since = t0.Add(tc.since)
		}
		p := tr.Page(tc.after, since, tc.limit)
		if got := seqs(p); !equal(got, tc.want) || p.Next != tc.wantNext || p.Evicted != 3 {
			t.Errorf("Page(%d, t0+%v, %d) = %v next %d evicted %d, want %v next %d evicted 3", tc.after, tc.since, tc.limit, got, p.Next, p.Evicted, tc.want, tc.wantNext)
		}
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTrailLogs one line per event.
func TestTrailLogs(t *testing.T) {
	var buf bytes.Buffer
	tr := notify.NewTrail(notify.TrailConfig{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	tr.Add(notify.NewEvent(notify.Ban, guard.Ban{Jail: "login", Key: "203.0.113.7", Reason: "5 denials"}, "me", t0))
	tr.Add(notify.NewEvent(notify.Expire, guard.Ban{Jail: "login", Key: "203.0.113.7"}, "me", t0))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"msg":"audit ban"`) || !strings.Contains(lines[0], `"key":"203.0.113.7"`) || !strings.Contains(lines[1], `"msg":"audit expire"`) {
		t.Errorf("log = %q, want one line per event", lines)
	}
}
