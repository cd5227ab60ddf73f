package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/wire"
)

// newRedisService returns a Service on the Redis at addr, with the real
// clock (the server's), closed when the test ends. Its store keeps one
// call in flight, so that concurrent checks queue and share batches as
// often as they can.
func newRedisService(t *testing.T, addr, rules string) *Service {
	t.Helper()
	c, err := config.Parse("redis.yaml", []byte("store: {type: redis, redis: {addrs: [\""+addr+"\"], in_flight: 1}}\n"+rules))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewService(context.Background(), c, Options{
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Namespace: fmt.Sprintf("test%d", time.Now().UnixNano()),
	})
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// postCheck asks a server's /v1/check over HTTP.
func postCheck(t *testing.T, c *http.Client, base, rule, key string) (int, wire.CheckResponse) {
	t.Helper()
	resp, err := c.Post(base+"/v1/check", "application/json", strings.NewReader(`{"rule":"`+rule+`","key":"`+key+`"}`))
	if err != nil {
		t.Errorf("POST /v1/check: %v", err)
		return 0, wire.CheckResponse{}
	}
	defer resp.Body.Close()
	var cr wire.CheckResponse
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&cr); err != nil {
			t.Errorf("decoding the check answer: %v", err)
		}
	}
	return resp.StatusCode, cr
}

// TestSharedRedisGlobalLimit runs several sluice servers on one Redis and
// hammers them together: across all of them, exactly the limit is
// admitted.
func TestSharedRedisGlobalLimit(t *testing.T) {
	r := testserver.StartRedis(t)
	const limit, servers, clients, each = 50, 3, 8, 25
	// Fail closed with a generous timeout: Redis must be the only
	// authority. A slow answer on a loaded machine (under -race) would
	// otherwise be decided by the default local policy, which admits per
	// process; closed denies it instead, and Redis still admits exactly
	// the limit over the many requests that follow.
	rules := fmt.Sprintf("rules:\n  - name: global\n    limits: [\"%d/day\"]\nfailure: {policy: closed, timeout: 10s}\n", limit)
	// One namespace for all the servers: they are one fleet.
	c, err := config.Parse("redis.yaml", []byte("store: {type: redis, redis: {addrs: [\""+r.Addr+"\"]}}\n"+rules))
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for range servers {
		s, err := NewService(context.Background(), c, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		hs := httptest.NewServer(s.Handler())
		t.Cleanup(hs.Close)
		urls = append(urls, hs.URL)
	}
	var allowed, denied atomic.Int64
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range servers * clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				code, cr := postCheck(t, client, urls[i%servers], "global", "tenant-42")
				switch {
				case code != http.StatusOK:
					t.Errorf("check = %d, want 200", code)
					return
				case cr.Allowed:
					allowed.Add(1)
				default:
					denied.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if a, d := allowed.Load(), denied.Load(); a != limit || a+d != servers*clients*each {
		t.Errorf("%d servers admitted %d of %d, want exactly %d", servers, a, a+d, limit)
	}
	for i, u := range urls {
		resp, err := client.Get(u + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "sluice_store_errors_total 0\n") {
			t.Logf("server %d: the store failed during the test (answered closed):\n%s", i, grepLines(string(body), "sluice_store"))
		}
	}
}

// TestRedisDownFailurePolicy kills Redis under a running service: each
// rule answers by its failure policy, and only the fail-closed rule
// answers 503.
func TestRedisDownFailurePolicy(t *testing.T) {
	r := testserver.StartRedis(t)
	s := newRedisService(t, r.Addr, `rules:
  - name: open
    limits: ["2/h"]
  - name: closed
    limits: ["2/h"]
  - name: local
    limits: ["3/h"]
failure:
  policy: local
  timeout: 200ms
  rules: {open: open, closed: closed}
forward_auth: {rule: closed}
`)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	client := &http.Client{Timeout: 10 * time.Second}
	for _, rule := range []string{"open", "closed", "local"} {
		if code, cr := postCheck(t, client, hs.URL, rule, "k"); code != 200 || !cr.Allowed {
			t.Fatalf("%s with Redis up = %d %+v, want allowed", rule, code, cr)
		}
	}

	r.Stop()
	tests := []struct {
		rule    string
		codes   []int
		allowed []bool
	}{
		// open allows beyond the limit: availability first.
		{"open", []int{200, 200, 200, 200}, []bool{true, true, true, true}},
		// closed refuses to decide: 503, never a guess.
		{"closed", []int{503, 503}, []bool{false, false}},
		// local decides in the process, from an empty state: 3 of 3/h.
		{"local", []int{200, 200, 200, 200}, []bool{true, true, true, false}},
	}
	for _, tt := range tests {
		for i := range tt.codes {
			code, cr := postCheck(t, client, hs.URL, tt.rule, "k")
			if code != tt.codes[i] || cr.Allowed != tt.allowed[i] {
				t.Errorf("%s #%d with Redis down = %d allowed=%v, want %d allowed=%v", tt.rule, i+1, code, cr.Allowed, tt.codes[i], tt.allowed[i])
			}
		}
	}
	for _, tt := range []struct {
		path string
		want int
	}{{"/v1/auth", 503}, {"/v1/auth?rule=open", 200}, {"/readyz", 503}, {"/healthz", 200}} {
		resp, err := client.Get(hs.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET %s with Redis down = %d, want %d", tt.path, resp.StatusCode, tt.want)
		}
	}
	// Envoy's API over HTTP answers by the same policies.
	for _, tt := range []struct {
		rule string
		want int
	}{{"closed", 503}, {"open", 200}} {
		body := `{"domain": "` + tt.rule + `", "descriptors": [{"entries": [{"key": "key", "value": "k"}]}]}`
		resp, err := client.Post(hs.URL+"/json", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("POST /json for %s with Redis down = %d, want %d", tt.rule, resp.StatusCode, tt.want)
		}
	}
	resp, err := client.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), "sluice_store_errors_total 0\n") || !strings.Contains(string(body), `sluice_store_degraded_total{policy="open",store="redis"}`) {
		t.Errorf("/metrics after the outage lacks store errors or degraded counts:\n%s", grepLines(string(body), "sluice_store"))
	}

	// Redis comes back on the same port: the service is ready again and
	// the closed rule decides again.
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, _ := postCheck(t, client, hs.URL, "closed", "k2")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("closed rule after Redis returned = %d, want 200 within 15s", code)
		}
		time.Sleep(50 * time.Millisecond) // waiting for the client to reconnect
	}
	resp, err = client.Get(hs.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz after Redis returned = %d, want 200", resp.StatusCode)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestRedisFleetBans bans on one server of a fleet sharing Redis: every
// server refuses the address and lists the ban, and any can lift it.
func TestRedisFleetBans(t *testing.T) {
	r := testserver.StartRedis(t)
	c, err := config.Parse("redis.yaml", []byte("store: {type: redis, redis: {addrs: [\""+r.Addr+"\"]}}\n"+
		"rules: [{name: web, limits: [\"100/min\"]}]\nadmin: {token: "+adminToken+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("fleet%d", time.Now().UnixNano())
	var fleet []*Service
	for range 2 {
		s, err := NewService(context.Background(), c, Options{Namespace: ns, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		fleet = append(fleet, s)
	}
	if _, err := fleet[0].admin.Ban(t.Context(), ManualJail, banEntry("203.0.113.9"), time.Hour, "test"); err != nil {
		t.Fatal(err)
	}
	// Each server enforces from its own replica of the bans, which the
	// Redis change log brings up to date within milliseconds: allow it
	// a bound, polled (every 10ms, so that the polls of a lifted address
	// stay far within the rule's 100/min for a second).
	within := func(want int, h http.Handler) int {
		var code int
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if code = auth(t, h, "", "203.0.113.9").Code; code == want {
				break
			}
		}
		return code
	}
	for i, s := range fleet {
		if code := within(http.StatusForbidden, s.Handler()); code != http.StatusForbidden {
			t.Errorf("server %d: banned address = %d, want 403", i, code)
		}
		bans, err := s.admin.Bans(t.Context())
		if err != nil || len(bans) != 1 || bans[0].Key != "203.0.113.9" || bans[0].Reason != "test" {
			t.Errorf("server %d: Bans() = %+v, %v; want the ban made on server 0", i, bans, err)
		}
	}
	if err := fleet[1].admin.Lift(t.Context(), ManualJail, banEntry("203.0.113.9")); err != nil {
		t.Fatal(err)
	}
	for i, s := range fleet {
		if code := within(http.StatusOK, s.Handler()); code != http.StatusOK {
			t.Errorf("server %d: lifted address = %d, want 200", i, code)
		}
		if bans, _ := s.admin.Bans(t.Context()); len(bans) != 0 {
			t.Errorf("server %d: Bans() after lift = %+v, want none", i, bans)
		}
	}
}
