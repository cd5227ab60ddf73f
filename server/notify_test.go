package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard/notify"
	"github.com/sluicehq/sluice/internal/testing/testclock"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

const hookSecret = "hook-secret-for-tests"

// hookReceiver is a webhook receiver on loopback that verifies every
// signature and records the events; hang makes it answer nothing until
// the test ends.
type hookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	events []notify.Event
	bad    int
}

func newHookReceiver(t *testing.T, hang bool) *hookReceiver {
	rc := &hookReceiver{}
	release := make(chan struct{})
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		body, _ := io.ReadAll(r.Body)
		var e notify.Event
		err := json.Unmarshal(body, &e)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if err != nil || notify.Verify([]byte(hookSecret), r.Header, body, time.Now(), 0) != nil {
			rc.bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		rc.events = append(rc.events, e)
	}))
	t.Cleanup(rc.Close)
	t.Cleanup(func() { close(release) }) // before the services close, which wait for their sinks
	return rc
}

// kinds returns the kinds of the events received, and fails the test if
// any was badly signed or received twice.
func (rc *hookReceiver) kinds(t *testing.T) []notify.Kind {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	seen := map[string]bool{}
	var out []notify.Kind
	for _, e := range rc.events {
		if seen[e.ID] {
			t.Errorf("event %s (%s of %s) received twice", e.ID, e.Kind, e.Key)
		}
		seen[e.ID] = true
		out = append(out, e.Kind)
	}
	if rc.bad > 0 {
		t.Errorf("%d requests badly signed", rc.bad)
	}
	return out
}

func (rc *hookReceiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.events)
}

// waitFor polls cond for at most 10 s and fails the test if it never
// holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // a poll with a deadline
	}
}

// notifyConfig is serviceConfig's rules with a webhook on the jail.
func notifyConfig(store, url string, queue int) string {
	return store + `rules:
  - name: login
    limits: ["2/min"]
guard:
  jails:
    - name: abuse
      rules: [login]
      max_failures: 2
      find_time: 1m
      ban_time: 10m
      notify:
        - {type: webhook, url: "` + url + `", secret: ` + hookSecret + `, queue: ` + fmt.Sprint(queue) + `, attempts: 2}
admin:
  token: ` + adminToken + "\n"
}

// sinkStats returns the counts of the sink of the service named name.
func sinkStats(t *testing.T, s *Service, name string) notify.SinkStats {
	t.Helper()
	st, ok := s.notes.SinkStats(name)
	if !ok {
		t.Fatalf("no sink %s", name)
	}
	return st
}

// audit returns the service's audit trail through the admin API.
func audit(t *testing.T, s *Service, query string) notify.Page {
	t.Helper()
	w := adminDo(t, s.AdminHandler(), "GET", "/admin/api/audit"+query, "", "Bearer "+adminToken)
	var p notify.Page
	if err := json.Unmarshal(w.Body.Bytes(), &p); w.Code != http.StatusOK || err != nil {
		t.Fatalf("GET /admin/api/audit%s = %d %s", query, w.Code, w.Body)
	}
	return p
}

func pageKinds(p notify.Page) []notify.Kind {
	var out []notify.Kind
	for _, e := range p.Entries {
		out = append(out, e.Kind)
	}
	return out
}

// TestNotifyService: a ban decided through the HTTP API, a lift through
// the admin API and an expiry each reach the jail's webhook once, signed,
// and the audit trail lists them in order.
func TestNotifyService(t *testing.T) {
	rc := newHookReceiver(t, false)
	clk := testclock.New(time.Now())
	s := newServiceWith(t, notifyConfig("", rc.URL, 0), Options{Clock: clk.Now})
	api := httptest.NewServer(s.Handler())
	defer api.Close()
	for range 4 { // 2 allowed, 2 denied: banned
		postCheck(t, api.Client(), api.URL, "login", "203.0.113.7")
	}
	waitFor(t, "the ban's webhook", func() bool { return rc.count() == 1 })
	bearer := "Bearer " + adminToken
	if w := adminDo(t, s.AdminHandler(), "DELETE", "/admin/api/bans?jail=abuse&key=203.0.113.7", "", bearer); w.Code != http.StatusNoContent {
		t.Fatalf("lift = %d %s", w.Code, w.Body)
	}
	if w := adminDo(t, s.AdminHandler(), "POST", "/admin/api/bans", `{"jail":"abuse","key":"198.51.100.0/24","duration":"1m"}`, bearer); w.Code != http.StatusCreated {
		t.Fatalf("ban = %d %s", w.Code, w.Body)
	}
	clk.Advance(2 * time.Minute)
	waitFor(t, "the expiry's webhook", func() bool { return rc.count() == 4 })
	if got, want := rc.kinds(t), []notify.Kind{notify.Ban, notify.Lift, notify.Ban, notify.Expire}; !slices.Equal(got, want) {
		t.Errorf("the receiver got %v, want %v", got, want)
	}
	rc.mu.Lock()
	if e := rc.events[3]; e.Key != "198.51.100.0/24" || e.Network != "198.51.100.0/24" || e.Jail != "abuse" || e.Source == "" {
		t.Errorf("expiry event = %+v", e)
	}
	rc.mu.Unlock()
	p := audit(t, s, "")
	if got, want := pageKinds(p), []notify.Kind{notify.Ban, notify.Lift, notify.Ban, notify.Expire}; !slices.Equal(got, want) || p.Next != 4 || p.Evicted != 0 {
		t.Errorf("audit = %v next %d evicted %d, want %v next 4", got, p.Next, p.Evicted, want)
	}
	if got := pageKinds(audit(t, s, "?after=2&limit=1")); !slices.Equal(got, []notify.Kind{notify.Ban}) {
		t.Errorf("audit after 2, limit 1 = %v, want [ban]", got)
	}
	for _, q := range []string{"?after=x", "?since=yesterday", "?limit=0", "?limit=1001"} {
		if w := adminDo(t, s.AdminHandler(), "GET", "/admin/api/audit"+q, "", bearer); w.Code != http.StatusBadRequest {
			t.Errorf("GET /admin/api/audit%s = %d, want 400", q, w.Code)
		}
	}
	// The receiver counts a notification when it arrives, the sink once
	// it is answered: the count may lag the receiver's a little.
	const sent = `sluice_notifications_sent_total{sink="abuse.webhook.0"} 4`
	waitFor(t, "4 notifications counted as sent", func() bool { return strings.Contains(metricsText(t, s), sent) })
}

// TestNotifyServiceHungReceiver: behind a webhook that never answers,
// decisions are still answered, the queue drops what exceeds it and
// counts it, and the audit trail has every ban.
func TestNotifyServiceHungReceiver(t *testing.T) {
	rc := newHookReceiver(t, true)
	const queue, keys = 5, 40
	s := newServiceWith(t, notifyConfig("", rc.URL, queue), Options{})
	api := httptest.NewServer(s.Handler())
	defer api.Close()
	for i := range keys {
		for range 4 {
			if code, _ := postCheck(t, api.Client(), api.URL, "login", fmt.Sprintf("203.0.113.%d", i)); code != http.StatusOK {
				t.Fatalf("check = %d, want 200", code)
			}
		}
		st := sinkStats(t, s, "abuse.webhook.0")
		if st.Queued > queue {
			t.Fatalf("the queue holds %d, more than its %d", st.Queued, queue)
		}
	}
	if p := audit(t, s, "?limit=1000"); len(p.Entries) != keys {
		t.Errorf("audit holds %d events, want %d bans", len(p.Entries), keys)
	}
	st := sinkStats(t, s, "abuse.webhook.0")
	if st.QueueFull < keys-queue-1 || st.QueueFull > keys-queue {
		t.Errorf("Stats() = %+v, want %d or %d dropped as the queue was full", st, keys-queue-1, keys-queue)
	}
	if m := metricsText(t, s); !strings.Contains(m, fmt.Sprintf(`sluice_notifications_dropped_total{reason="queue_full",sink="abuse.webhook.0"} %d`, st.QueueFull)) {
		t.Errorf("metrics lack the drops:\n%s", grepLines(m, "sluice_notif"))
	}
}

// TestNotifyFleetOnce: three processes share their bans in Redis, each
// with the same webhook: a ban is told once, by the process that made
// it, and its expiry once, by whichever claimed it.
func TestNotifyFleetOnce(t *testing.T) {
	r := testserver.StartRedis(t)
	rc := newHookReceiver(t, false)
	c, err := config.Parse("fleet.yaml", []byte(notifyConfig("store: {type: redis, redis: {addrs: [\""+r.Addr+"\"]}}\n", rc.URL, 0)))
	if err != nil {
		t.Fatal(err)
	}
	clk := testclock.New(time.Now())
	var fleet []*Service
	for range 3 {
		s, err := NewService(context.Background(), c, Options{Clock: clk.Now, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		fleet = append(fleet, s)
	}
	bearer := "Bearer " + adminToken
	if w := adminDo(t, fleet[1].AdminHandler(), "POST", "/admin/api/bans", `{"jail":"abuse","key":"key:mallory","duration":"1m"}`, bearer); w.Code != http.StatusCreated {
		t.Fatalf("ban = %d %s", w.Code, w.Body)
	}
	for _, s := range fleet {
		waitFor(t, "the ban in every process", func() bool { return s.st.registry.Bans().Stats().Bans == 1 })
	}
	clk.Advance(2 * time.Minute)
	waitFor(t, "every process to sweep the lapsed ban", func() bool {
		n := int64(0)
		for _, s := range fleet {
			st := s.notes.Expiries()
			n += st.Told + st.Others
		}
		return n >= 3 // a replica that reloads from Redis may see the ban lapse again: claimed already
	})
	for _, s := range fleet {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s.notes.Close(ctx) // delivers what is queued
		cancel()
	}
	if got, want := rc.kinds(t), []notify.Kind{notify.Ban, notify.Expire}; !slices.Equal(got, want) {
		t.Errorf("the fleet told %v, want %v: once each", got, want)
	}
	if got := pageKinds(audit(t, fleet[1], "")); !slices.Contains(got, notify.Ban) {
		t.Errorf("the banning process's audit = %v, want its ban", got)
	}
}

// metricsText returns the service's /metrics.
func metricsText(t *testing.T, s *Service) string {
	t.Helper()
	return do(t, s.Handler(), "GET", "/metrics", "").Body.String()
}

// TestNotifyExecEveryJail: guard.notify tells of the bans of every jail,
// the manual one included, here through a command.
func TestNotifyExecEveryJail(t *testing.T) {
	dir := t.TempDir()
	out := dir + "/bans"
	prog := dir + "/record"
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nprintf '%s|%s|%s\\n' \"$1\" \"$2\" \"$3\" >> "+out+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := newServiceWith(t, `rules:
  - name: login
    limits: ["2/min"]
guard:
  notify:
    - {type: exec, argv: ["`+prog+`", "{event}", "{jail}", "{key}"], events: [ban]}
admin:
  token: `+adminToken+"\n", Options{})
	bearer := "Bearer " + adminToken
	if w := adminDo(t, s.AdminHandler(), "POST", "/admin/api/bans", `{"jail":"manual","key":"key:a b;$(x)","duration":"1h"}`, bearer); w.Code != http.StatusCreated {
		t.Fatalf("ban = %d %s", w.Code, w.Body)
	}
	if w := adminDo(t, s.AdminHandler(), "DELETE", "/admin/api/bans?jail=manual&key="+url.QueryEscape("key:a b;$(x)"), "", bearer); w.Code != http.StatusNoContent {
		t.Fatalf("lift = %d %s", w.Code, w.Body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.notes.Close(ctx)
	got, _ := os.ReadFile(out)
	if string(got) != "ban|manual|a b;$(x)\n" {
		t.Errorf("the command recorded %q, want the ban alone (events: [ban])", got)
	}
}
