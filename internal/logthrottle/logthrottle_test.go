package logthrottle

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newLogger(buf *bytes.Buffer, c Config) *slog.Logger {
	return slog.New(New(slog.NewTextHandler(buf, nil), c))
}

// TestFloodBounded floods the log with 100,000 denials of two rules over
// ten seconds: each rule writes its burst plus one line a second, and
// the lines that pass count the ones left out, so that no event is lost
// from the count.
func TestFloodBounded(t *testing.T) {
	var buf bytes.Buffer
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	log := newLogger(&buf, Config{Burst: 5, Every: time.Second, Clock: clk.now})
	const n = 100_000
	for i := range n {
		clk.t = clk.t.Add(10 * time.Second / n)
		log.Info("denied", "rule", []string{"login", "api"}[i%2], "key", fmt.Sprint(i))
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	// Per rule: 5 at once, then one a second for 10 s.
	if want := 2 * (5 + 10); len(lines) > want {
		t.Errorf("%d lines for %d events, want at most %d", len(lines), n, want)
	}
	if len(buf.Bytes()) > 4096 {
		t.Errorf("%d bytes of log for %d events, want at most 4 KiB", len(buf.Bytes()), n)
	}
	total := len(lines)
	for _, l := range lines {
		var s int
		if i := strings.Index(l, SuppressedKey+"="); i >= 0 {
			fmt.Sscan(l[i+len(SuppressedKey)+1:], &s)
		}
		total += s
	}
	// The lines left out after the last line that passed are not told.
	if total > n || total < n-n/10 { // at most the last second of each rule is untold
		t.Errorf("lines plus suppressed counts = %d, want close to %d", total, n)
	}
}

// TestManyMessagesBounded floods the log with distinct rules: beyond
// MaxKeys they share one allowance, so the lines stay bounded too.
func TestManyMessagesBounded(t *testing.T) {
	var buf bytes.Buffer
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	log := newLogger(&buf, Config{Burst: 2, Every: time.Hour, MaxKeys: 100, Clock: clk.now})
	for i := range 50_000 {
		log.Warn("store failed", "rule", fmt.Sprint("rule-", i))
	}
	if lines := strings.Count(buf.String(), "\n"); lines > 2*100+2 {
		t.Errorf("%d lines for 50,000 rules, want at most %d", lines, 2*100+2)
	}
}

// TestAttrsShareAllowance checks that a logger with attributes (the rule
// given once by With) is throttled by that rule too.
func TestAttrsShareAllowance(t *testing.T) {
	var buf bytes.Buffer
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	base := newLogger(&buf, Config{Burst: 1, Every: time.Hour, Clock: clk.now})
	a, b := base.With("rule", "a"), base.With("rule", "b")
	for range 10 {
		a.Info("denied")
		b.Info("denied")
		a.WithGroup("g").Info("denied", "x", 1)
	}
	if got := strings.Count(buf.String(), "\n"); got != 2 {
		t.Errorf("%d lines, want 2 (one per rule):\n%s", got, buf.String())
	}
	if !base.Handler().Enabled(context.Background(), slog.LevelInfo) || base.Handler().Enabled(context.Background(), slog.LevelDebug) {
		t.Error("Enabled does not follow the next handler")
	}
}
