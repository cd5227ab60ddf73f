package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testing/storefault"
	"github.com/sluicehq/sluice/internal/testing/testclock"
	"github.com/sluicehq/sluice/server/admin"
)

// liveRules adds a shadow rule to serviceConfig.
const liveRules = `rules:
  - name: api
    limits: ["3/min"]
  - name: login
    limits: ["2/min"]
  - name: trial
    limits: ["1/min"]
    shadow: true
guard:
  deny: ["key:spammer"]
  jails:
    - {name: abuse, rules: [login], max_failures: 2, find_time: 1m, ban_time: 10m}
admin:
  token: test-token-0123456789
`

// takeN asks the HTTP API for n takes of key under rule.
func takeN(t *testing.T, s *Service, rule, key string, n int) {
	t.Helper()
	for range n {
		if w := do(t, s.Handler(), "POST", "/v1/check", fmt.Sprintf(`{"rule":%q,"key":%q}`, rule, key)); w.Code != 200 {
			t.Fatalf("check %s %s = %d %s", rule, key, w.Code, w.Body)
		}
	}
}

// snapshotAt takes the dashboard's sample at now and returns its snapshot
// with the rates of the last minutes and the keys' states, as GET
// /admin/api/live answers it.
func snapshotAt(t *testing.T, s *Service, now time.Time) *admin.Snapshot {
	t.Helper()
	s.live.sample(now)
	return s.live.current(t.Context())
}

func ruleOf(t *testing.T, snap *admin.Snapshot, name string) admin.RuleLive {
	t.Helper()
	for _, r := range snap.Rules {
		if r.Name == name {
			for _, series := range [][]float64{r.Allowed, r.Denied, r.Estimated, r.Banned, r.DenyList} {
				if len(series) != len(snap.Times) {
					t.Fatalf("rule %s: a series of %d for %d times", name, len(series), len(snap.Times))
				}
			}
			return r
		}
	}
	t.Fatalf("no rule %s in the snapshot", name)
	return admin.RuleLive{}
}

// topString writes a rule's top keys as "key:refusals:state ...".
func topString(r admin.RuleLive) string {
	var b strings.Builder
	for i, k := range r.Top {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%d:%s", k.Key, k.Refusals, k.State)
	}
	return b.String()
}

// TestLiveSnapshot drives the dashboard's rates and top keys on a time
// grid: each step sends takes, advances the clock and checks the latest
// point of each series by cause, the totals, the top keys and their
// state.
func TestLiveSnapshot(t *testing.T) {
	s, clk := newService(t, liveRules)
	type takes struct {
		rule, key string
		n         int
	}
	tests := []struct {
		name   string
		adv    time.Duration
		send   []takes
		rule   string
		latest string // allowed denied estimated banned deny-list, per second
		totals admin.Causes
		top    string
		mode   string
	}{
		{"api over its limit", time.Second, []takes{{"api", "a", 5}, {"api", "b", 1}}, "api", "4 2 0 0 0",
			admin.Causes{Allowed: 4, Denied: 2}, "a:2:denied", "enforce"},
		{"rates over two seconds", 2 * time.Second, []takes{{"api", "c", 4}}, "api", "1.5 0.5 0 0 0",
			admin.Causes{Allowed: 7, Denied: 3}, "a:2:denied c:1:denied", "enforce"},
		{"a quiet second", time.Second, nil, "api", "0 0 0 0 0", admin.Causes{Allowed: 7, Denied: 3}, "a:2:denied c:1:denied", "enforce"},
		{"login strikes ban the address", time.Second, []takes{{"login", "203.0.113.7", 4}}, "login", "2 2 0 0 0",
			admin.Causes{Allowed: 2, Denied: 2}, "203.0.113.7:2:banned", "enforce"},
		{"the ban refuses", time.Second, []takes{{"login", "203.0.113.7", 3}}, "login", "0 0 0 3 0",
			admin.Causes{Allowed: 2, Denied: 2, Banned: 3}, "203.0.113.7:5:banned", "enforce"},
		{"the deny list refuses", time.Second, []takes{{"api", "spammer", 2}}, "api", "0 0 0 0 2",
			admin.Causes{Allowed: 7, Denied: 3, DenyList: 2}, "a:2:denied spammer:2:deny-list c:1:denied", "enforce"},
		{"a shadow rule counts what it would deny", time.Second, []takes{{"trial", "t", 3}}, "trial", "1 2 0 0 0",
			admin.Causes{Allowed: 1, Denied: 2}, "t:2:denied", "shadow"},
		{"the keys leave the window", 2 * time.Minute, nil, "api", "0 0 0 0 0", admin.Causes{Allowed: 7, Denied: 3, DenyList: 2}, "", "enforce"},
	}
	for _, tt := range tests {
		for _, tk := range tt.send {
			takeN(t, s, tk.rule, tk.key, tk.n)
		}
		clk.Advance(tt.adv)
		snap := snapshotAt(t, s, clk.Now())
		r := ruleOf(t, snap, tt.rule)
		last := func(xs []float64) float64 { return xs[len(xs)-1] }
		got := fmt.Sprintf("%v %v %v %v %v, %+v, %q %s %s", last(r.Allowed), last(r.Denied), last(r.Estimated), last(r.Banned), last(r.DenyList),
			r.Totals, topString(r), r.Mode, r.Health)
		want := fmt.Sprintf("%s, %+v, %q %s ok", tt.latest, tt.totals, tt.top, tt.mode)
		if got != want {
			t.Errorf("%s: %s = %s, want %s", tt.name, tt.rule, got, want)
		}
	}
	snap := snapshotAt(t, s, clk.Now().Add(time.Second))
	if n := len(snap.Times); n != 9 || snap.Times[n-1] != clk.Now().Add(time.Second).Unix() {
		t.Errorf("times = %v, want 9 samples ending now", snap.Times)
	}
	if b := ruleOf(t, snap, "login").Top; len(b) != 0 {
		t.Errorf("login's top after the window: %v", b)
	}
}

// TestLiveBounds floods a rule with denials of distinct keys: the top
// keys stay bounded and the heavy key stays first; the series keep
// liveSeconds points.
func TestLiveBounds(t *testing.T) {
	s, clk := newService(t, liveRules)
	w := s.live.window("api")
	for i := range 50_000 {
		w.Add(clk.Now(), fmt.Sprintf("flood-%d", i))
		if i%20 == 0 {
			w.Add(clk.Now(), "heavy")
		}
	}
	all, total := w.Top(clk.Now(), 1<<20)
	if max := 6 * 8 * 32; len(all) > max || total != 52_500 || all[0].Key != "heavy" {
		t.Errorf("after a flood: %d keys kept (at most %d), total %d, first %v; want heavy first", len(all), max, total, all[0])
	}
	for range liveSeconds + 20 {
		clk.Advance(time.Second)
		s.live.sample(clk.Now())
	}
	snap := snapshotAt(t, s, clk.Now().Add(time.Second))
	if r := ruleOf(t, snap, "api"); len(snap.Times) != liveSeconds || len(r.Top) > liveTop {
		t.Errorf("%d samples, %d top keys; want %d and at most %d", len(snap.Times), len(r.Top), liveSeconds, liveTop)
	}
}

// TestLiveHealth reports a store that fails as errors.
func TestLiveHealth(t *testing.T) {
	c, err := config.Parse("test.yaml", []byte(liveRules))
	if err != nil {
		t.Fatal(err)
	}
	clk := testclock.New(t0)
	store := storefault.New(t)
	s, err := NewService(t.Context(), c, Options{Clock: clk.Now, Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, fail := range []bool{true, false} {
		store.SetFail(fail)
		do(t, s.Handler(), "POST", "/v1/check", `{"rule":"api","key":"a"}`)
		clk.Advance(time.Second)
		want := map[bool]string{true: "errors", false: "ok"}[fail]
		if got := ruleOf(t, snapshotAt(t, s, clk.Now()), "api").Health; got != want {
			t.Errorf("store failing %v: health %q, want %q", fail, got, want)
		}
	}
}

// TestLiveReload keeps the series of the rules a reload keeps, and
// starts the new ones at zero, aligned with the others.
func TestLiveReload(t *testing.T) {
	s, clk := newService(t, liveRules)
	takeN(t, s, "api", "a", 5)
	clk.Advance(time.Second)
	s.live.sample(clk.Now())
	c, err := config.Parse("test.yaml", []byte(strings.Replace(liveRules, "  - name: trial", "  - name: search\n    limits: [\"5/s\"]\n  - name: trial", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(c); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	snap := snapshotAt(t, s, clk.Now())
	if api, search := ruleOf(t, snap, "api"), ruleOf(t, snap, "search"); fmt.Sprint(api.Allowed, api.Denied, search.Allowed) != "[3 0] [2 0] [0 0]" || topString(api) != "a:2:denied" {
		t.Errorf("after a reload: api %v %v %s, search %v", api.Allowed, api.Denied, topString(api), search.Allowed)
	}
}

// TestLiveStream reads the server-sent events of the admin API: one
// snapshot a second, to each dashboard, and none without the token.
func TestLiveStream(t *testing.T) {
	s, _ := newService(t, liveRules)
	takeN(t, s, "api", "a", 5)
	srv := httptest.NewServer(s.AdminHandler())
	defer srv.Close()
	open := func(authz string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/admin/api/events", nil)
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		return srv.Client().Do(req)
	}
	if res, err := open(""); err != nil || res.StatusCode != 401 {
		t.Fatalf("events without the token: %v %v, want 401", res.Status, err)
	}
	var streams []*bufio.Reader
	for range 3 {
		res, err := open("Bearer " + adminToken)
		if err != nil || res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("events: %v %v", res, err)
		}
		defer res.Body.Close()
		streams = append(streams, bufio.NewReader(res.Body))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	go func() { <-ctx.Done(); srv.CloseClientConnections() }() // bounds the reads below
	for i, r := range streams {
		snap, err := nextSnapshot(r)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		if api := ruleOf(t, snap, "api"); topString(api) != "a:2:denied" {
			t.Errorf("stream %d: api top %q, want a:2:denied", i, topString(api))
		}
	}
	// Closing the feed, as sluice serve does on shutdown, ends the
	// streams, which a server's Shutdown would otherwise wait for.
	s.admin.Feed().Close()
	for i, r := range streams {
		if _, err := nextSnapshot(r); err == nil {
			for err == nil {
				_, err = nextSnapshot(r)
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("stream %d still open after the feed closed", i)
		}
	}
}

// nextSnapshot reads events from r up to the next snapshot.
func nextSnapshot(r *bufio.Reader) (*admin.Snapshot, error) {
	for range 100 {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var s admin.Snapshot
			return &s, json.Unmarshal([]byte(data), &s)
		}
	}
	return nil, fmt.Errorf("no snapshot in 100 lines")
}
