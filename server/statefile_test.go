package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/testing/testclock"
)

// stateRules are the rules of the state file's tests; the file's path
// follows.
const stateRules = `rules:
  - name: login
    limits: ["3/min"]
guard:
  jails:
    - {name: abuse, rules: [login], max_failures: 2, find_time: 1m, ban_time: 10m}
  state_file: `

// openStateService starts a service on the memory store whose state file
// is path, on clk.
func openStateService(t *testing.T, path string, clk *testclock.Clock, o Options) (*Service, error) {
	t.Helper()
	c, err := config.Parse("test.yaml", []byte(stateRules+path+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	o.Clock = clk.Now
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return NewService(context.Background(), c, o)
}

// banList writes the bans in force as "jail/key/until/offences ...".
func banList(t *testing.T, s *Service) string {
	t.Helper()
	bans, err := s.admin.Bans(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range bans {
		out = append(out, fmt.Sprintf("%s/%s/%s/%d", b.Jail, b.Key, b.Until.UTC().Format(time.RFC3339Nano), b.Offences))
	}
	return strings.Join(out, " ")
}

// TestStateFileRestart: the bans in force (a jail's, with its offences,
// and an admin's of an address, a network and a key) and the list edits
// survive a restart, both ways: every ban still in force comes back
// with its expiry, a ban that lapsed while the service was down does not,
// and a removed entry stays removed.
func TestStateFileRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	clk := testclock.New(t0)
	s, err := openStateService(t, path, clk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	takeN(t, s, "login", "203.0.113.7", 6) // two denials: the jail bans
	for _, b := range []struct {
		key string
		d   time.Duration
	}{{"198.51.100.0/24", time.Hour}, {"key:mallory", 2 * time.Hour}, {"192.0.2.1", time.Minute}} {
		if _, err := s.admin.Ban(ctx, ManualJail, banEntry(b.key), b.d, "by hand"); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range []struct {
		list, entry string
		add         bool
	}{{"deny", "192.0.2.0/24", true}, {"allow", "key:ops", true}, {"deny", "key:spammer", true}, {"deny", "key:spammer", false}} {
		entry, _ := guard.ParseEntry(e.entry)
		edit := s.admin.Remove
		if e.add {
			edit = s.admin.Add
		}
		if err := edit(e.list, entry); err != nil {
			t.Fatal(err)
		}
	}
	before := banList(t, s)
	t.Logf("bans before: %s", before)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	clk.Advance(2 * time.Minute) // 192.0.2.1's ban lapses while the service is down
	s2, err := openStateService(t, path, clk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	var want []string
	for _, b := range strings.Fields(before) {
		if !strings.Contains(b, "/192.0.2.1/") {
			want = append(want, b)
		}
	}
	if got := banList(t, s2); got != strings.Join(want, " ") || !strings.Contains(before, "abuse/203.0.113.7/") {
		t.Errorf("bans after a restart:\n%s\nwant those before but the lapsed one:\n%s", got, before)
	}
	deny, _ := s2.admin.List("deny")
	allow, _ := s2.admin.List("allow")
	if fmt.Sprint(deny, allow) != "[192.0.2.0/24] [key:ops]" {
		t.Errorf("lists after a restart: deny %v, allow %v; want [192.0.2.0/24] [key:ops]", deny, allow)
	}
	if v := s2.state.Load().guard.Check(guard.NewActor(netip.MustParseAddr("203.0.113.7"), "")); v.Action != guard.Banned {
		t.Errorf("the restored jail ban is not enforced: %v", v.Action)
	}
}

// TestStateFileBad: a state file that is corrupt, truncated, of another
// version or not one stops the service with an error that names the file
// and says what is wrong; -ignore-state-file starts without it, and the
// first write replaces it with a valid one.
func TestStateFileBad(t *testing.T) {
	dir := t.TempDir()
	clk := testclock.New(t0)
	valid := filepath.Join(dir, "valid.json")
	s, err := openStateService(t, valid, clk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.admin.Ban(t.Context(), ManualJail, banEntry("203.0.113.9"), time.Hour, "<b>markup</b>"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	good, err := os.ReadFile(valid)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, content, want string
	}{
		{"corrupt", "{\x00\x01 not json", "corrupt or truncated"},
		{"truncated", string(good[:len(good)/2]), "corrupt or truncated"},
		{"foreign", `{"bans": [{"ip": "203.0.113.9"}]}`, "not a sluice state file"},
		{"empty", "", "corrupt or truncated"},
		{"version", strings.Replace(string(good), `"version":1`, `"version":99`, 1), "of version 99, this sluice reads 1"},
		{"entry", strings.Replace(string(good), `"list_edits":[]`, `"list_edits":[{"list":"deny","entry":"10.0.0.0/99","add":true}]`, 1), `list edit "10.0.0.0/99"`},
	} {
		path := filepath.Join(dir, tt.name+".json")
		if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := openStateService(t, path, clk, Options{})
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "-ignore-state-file") && tt.name != "entry" {
			t.Errorf("%s state file: NewService error %v; want one naming %s and saying %q", tt.name, err, path, tt.want)
			continue
		}
		s, err := openStateService(t, path, clk, Options{IgnoreStateFile: true})
		if err != nil {
			t.Fatalf("%s state file, ignored: %v", tt.name, err)
		}
		if got := banList(t, s); got != "" {
			t.Errorf("%s state file, ignored: bans %s, want none", tt.name, got)
		}
		s.Close()
		if _, err := loadState(path); err != nil {
			t.Errorf("%s state file, ignored then written: %v", tt.name, err)
		}
	}
}

// TestStateFileWriteFails: a state file that cannot be written leaves
// the bans enforced from memory and logs the failure, once and then at
// most once a minute, and once more when a write succeeds again; it
// leaves no temporary file behind.
func TestStateFileWriteFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gone", "state.json") // no such directory: every write fails
	var logs bytes.Buffer
	clk := testclock.New(t0)
	s, err := openStateService(t, path, clk, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.admin.Ban(t.Context(), ManualJail, banEntry("203.0.113.9"), time.Hour, "by hand"); err != nil {
		t.Fatal(err)
	}
	failures := func() int { return strings.Count(logs.String(), "guard.state_file not written") }
	for i, want := range []int{1, 1, 1, 2, 2} { // each step saves, 20 s later
		s.stateFile.saveIfChanged(t.Context())
		if got := failures(); got != want {
			t.Errorf("save %d at +%v: %d failures logged, want %d", i, clk.Now().Sub(t0), got, want)
		}
		clk.Advance(20 * time.Second)
	}
	if v := s.state.Load().guard.Check(guard.NewActor(netip.MustParseAddr("203.0.113.9"), "")); v.Action != guard.Banned {
		t.Errorf("the ban is not enforced while its state file fails: %v", v.Action)
	}
	if err := os.Mkdir(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	s.stateFile.saveIfChanged(t.Context())
	s.stateFile.saveIfChanged(t.Context()) // nothing changed: no write, no log
	if !strings.Contains(logs.String(), "guard.state_file written again") || failures() != 2 {
		t.Errorf("after the directory came back:\n%s", logs.String())
	}
	if st, err := loadState(path); err != nil || len(st.Bans) != 1 {
		t.Errorf("the state file after a write: %d bans, %v", len(st.Bans), err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
