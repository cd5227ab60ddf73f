package bannotify

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/notify"
)

// t0 is the time of the tests' events.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// newNotifier returns a Notifier over a memory registry, closed when the
// test ends.
func newNotifier(t *testing.T) *Notifier {
	t.Helper()
	n := New(Config{Registry: guard.NewMemoryRegistry(guard.BanLimits{}), Registerer: prometheus.NewRegistry(),
		Logger: slog.New(slog.DiscardHandler), Clock: func() time.Time { return t0 }})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	return n
}

// sinksConfig is a configuration whose jail "abuse" has a command sink
// that appends its arguments to out, for the events of events, and
// whose guard.notify has one for every event of every jail when all.
func sinksConfig(t *testing.T, prog, events string, all bool) *config.Config {
	t.Helper()
	text := `rules:
  - name: login
    limits: ["2/min"]
guard:
  jails:
    - name: abuse
      rules: [login]
      notify:
        - {type: exec, argv: ["` + prog + `", "abuse", "{event}", "{key}"], events: [` + events + `]}
`
	if all {
		text += `  notify:
    - {type: exec, argv: ["` + prog + `", "all", "{event}", "{key}"]}
`
	}
	c, err := config.Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// recorder writes a command that appends its arguments as a line to a
// file, and returns the command and the file.
func recorder(t *testing.T) (prog, out string) {
	t.Helper()
	dir := t.TempDir()
	prog, out = filepath.Join(dir, "record"), filepath.Join(dir, "events")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho \"$@\" >> "+out+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return prog, out
}

// TestNotifierTell tells of bans, lifts and expiries of two jails: the
// trail holds every event, and each sink gets those of its jails and
// kinds, delivered by Close.
func TestNotifierTell(t *testing.T) {
	prog, out := recorder(t)
	n := newNotifier(t)
	s, err := n.Sinks(sinksConfig(t, prog, "ban, expire", true))
	if err != nil {
		t.Fatal(err)
	}
	n.Use(s)
	n.Ban(guard.Ban{Jail: "abuse", Key: "203.0.113.7"})
	n.Lift(guard.Ban{Jail: "abuse", Key: "203.0.113.7"})
	n.Ban(guard.Ban{Jail: "manual", Key: "mallory"})
	n.Expire(guard.Ban{Jail: "abuse", Key: "198.51.100.1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n.Close(ctx)
	var kinds []string
	for _, e := range n.Audit(0, time.Time{}, 10).Entries {
		kinds = append(kinds, string(e.Kind))
	}
	if got, want := strings.Join(kinds, " "), "ban lift ban expire"; got != want {
		t.Errorf("the trail holds %s, want %s", got, want)
	}
	data, _ := os.ReadFile(out)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	want := map[string]bool{"abuse ban 203.0.113.7": true, "abuse expire 198.51.100.1": true,
		"all ban 203.0.113.7": true, "all lift 203.0.113.7": true, "all ban mallory": true, "all expire 198.51.100.1": true}
	for _, l := range lines {
		if !want[l] {
			t.Errorf("a sink was told %q, which it does not want", l)
		}
		delete(want, l)
	}
	for l := range want {
		t.Errorf("no sink was told %q", l)
	}
}

// TestNotifierReload: the sinks of a new configuration keep those it
// does not change, with their queues, and Use retires the others.
func TestNotifierReload(t *testing.T) {
	prog, _ := recorder(t)
	n := newNotifier(t)
	sink := func() *notify.Sink {
		t.Helper()
		s := n.sinks.Load()
		if s == nil || len(s.byJail["abuse"]) != 1 {
			t.Fatalf("sinks in force = %+v, want one of jail abuse", s)
		}
		return s.byJail["abuse"][0].sink
	}
	reload := func(events string) {
		t.Helper()
		s, err := n.Sinks(sinksConfig(t, prog, events, false))
		if err != nil {
			t.Fatal(err)
		}
		n.Use(s)
	}
	reload("ban")
	before := sink()
	reload("ban")
	if sink() != before {
		t.Error("the same configuration replaced the sink")
	}
	if _, ok := n.SinkStats(before.Name()); !ok {
		t.Errorf("SinkStats(%s): no such sink", before.Name())
	}
	reload("ban, lift")
	if sink() == before {
		t.Error("a changed sink was kept")
	}
	deadline := time.Now().Add(10 * time.Second)
	for before.Notify(notify.Event{}) { // retired in the background
		if time.Now().After(deadline) {
			t.Fatal("the replaced sink still takes events")
		}
		time.Sleep(time.Millisecond) // a poll with a deadline
	}
}

// TestNotifierBadSink: a configuration whose sink cannot be built is an
// error, and the sinks in force stay.
func TestNotifierBadSink(t *testing.T) {
	prog, _ := recorder(t)
	n := newNotifier(t)
	good, err := n.Sinks(sinksConfig(t, prog, "ban", false))
	if err != nil {
		t.Fatal(err)
	}
	n.Use(good)
	c := sinksConfig(t, prog, "ban", true)
	c.Guard.Notify[0].Type = "carrier-pigeon"
	if _, err := n.Sinks(c); err == nil || !strings.Contains(err.Error(), "carrier-pigeon") {
		t.Errorf("Sinks(unknown type) = %v, want an error naming it", err)
	}
	if n.sinks.Load() != good {
		t.Error("a failed build replaced the sinks in force")
	}
}
