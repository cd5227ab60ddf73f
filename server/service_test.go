package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testing/testclock"
	"github.com/sluicehq/sluice/server/rules"
)

const serviceConfig = `rules:
  - name: api
    limits: ["3/min"]
  - name: login
    limits: ["2/min"]
forward_auth:
  rule: api
guard:
  allow: [192.0.2.10, "key:203.0.113.99"]
  deny: [198.51.100.0/24]
  jails:
    - {name: abuse, rules: [login], max_failures: 2, find_time: 1m, ban_time: 10m}
admin:
  token: test-token-0123456789
`

// newService returns a Service on the memory store for the configuration
// text, on a test clock, closed when the test ends.
func newService(t testing.TB, text string) (*Service, *testclock.Clock) {
	t.Helper()
	c, err := config.Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	clk := testclock.New(t0)
	s, err := NewService(context.Background(), c, Options{Clock: clk.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, clk
}

// auth asks the forward-auth endpoint as a proxy on loopback would, for
// a client at ip, with extra headers as name, value pairs.
func auth(t *testing.T, h http.Handler, query, ip string, headers ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/v1/auth"+query, nil)
	r.RemoteAddr = "127.0.0.1:40000"
	if ip != "" {
		r.Header.Set("X-Forwarded-For", ip)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestForwardAuthLimits(t *testing.T) {
	s, _ := newService(t, serviceConfig)
	h := s.Handler()
	for i := range 3 {
		w := auth(t, h, "", "203.0.113.7")
		if w.Code != http.StatusOK {
			t.Fatalf("auth #%d = %d, want 200", i+1, w.Code)
		}
		if got, want := w.Header().Get("RateLimit"), `"api";r=`; !strings.HasPrefix(got, want) {
			t.Errorf("auth #%d RateLimit = %q, want prefix %q", i+1, got, want)
		}
	}
	w := auth(t, h, "", "203.0.113.7")
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("auth #4 = %d, want 429", w.Code)
	}
	for name, want := range map[string]string{"Retry-After": "20", "RateLimit": `"api";r=0;t=60`, "RateLimit-Policy": `"api";q=3;w=60`} {
		if got := w.Header().Get(name); got != want {
			t.Errorf("denied %s = %q, want %q", name, got, want)
		}
	}
	// Another client has its own allowance; nginx's 403 is asked for.
	if w := auth(t, h, "?deny_status=403", "203.0.113.8"); w.Code != http.StatusOK {
		t.Errorf("other client = %d, want 200", w.Code)
	}
	if w := auth(t, h, "?deny_status=403", "203.0.113.7"); w.Code != http.StatusForbidden {
		t.Errorf("deny_status=403 = %d, want 403", w.Code)
	}
	// A forged X-Forwarded-For from an untrusted peer is ignored: the
	// peer's own address is the key.
	r := httptest.NewRequest(http.MethodGet, "/v1/auth", nil)
	r.RemoteAddr = "203.0.113.7:5555"
	r.Header.Set("X-Forwarded-For", "10.9.9.9")
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusTooManyRequests {
		t.Errorf("forged X-Forwarded-For from an untrusted peer = %d, want 429 (keyed by the peer)", w.Code)
	}
}

func TestForwardAuthBadInput(t *testing.T) {
	s, _ := newService(t, serviceConfig)
	h := s.Handler()
	tests := []struct {
		query, ip string
		want      int
	}{
		{"?rule=nope", "203.0.113.7", http.StatusBadRequest},
		{"?deny_status=500", "203.0.113.7", http.StatusBadRequest},
		{"?rule=login", "not-an-ip", http.StatusOK},                   // the shared "unknown" key
		{"?rule=login", "not-an-ip, 203.0.113.1", http.StatusOK},      // the last hop is the client
		{"?rule=login", "also-bad", http.StatusOK},                    // "unknown" again
		{"?rule=login", "203.0.113.1, x", http.StatusTooManyRequests}, // and its third request
	}
	for _, tt := range tests {
		if w := auth(t, h, tt.query, tt.ip); w.Code != tt.want {
			t.Errorf("auth(%q, XFF %q) = %d %s, want %d", tt.query, tt.ip, w.Code, w.Body, tt.want)
		}
	}
}

// TestForwardAuthWhichRule checks that forward-auth never guesses which
// of several rules a request that names none is for: 400, saying how to
// name one; with one rule, that rule applies.
func TestForwardAuthWhichRule(t *testing.T) {
	two := strings.Replace(serviceConfig, "forward_auth:\n  rule: api\n", "", 1)
	s, _ := newService(t, two)
	if w := auth(t, s.Handler(), "", "203.0.113.7"); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "forward_auth.rule") {
		t.Errorf("no rule named, two in the file: %d %s, want 400 saying how to name one", w.Code, w.Body)
	}
	if w := auth(t, s.Handler(), "?rule=login", "203.0.113.7"); w.Code != http.StatusOK {
		t.Errorf("?rule=login: %d %s, want 200", w.Code, w.Body)
	}
	one, _ := newService(t, "rules:\n  - name: only\n    limits: [\"1/min\"]\n")
	codes := []int{auth(t, one.Handler(), "", "203.0.113.7").Code, auth(t, one.Handler(), "", "203.0.113.7").Code}
	if fmt.Sprint(codes) != "[200 429]" {
		t.Errorf("the only rule, 1/min: %v, want [200 429]", codes)
	}
}

func TestForwardAuthKeyParts(t *testing.T) {
	s, _ := newService(t, `rules:
  - name: api
    limits: ["1/min"]
forward_auth:
  key: [ip, method, path, "header:X-Api-Key"]
`)
	h := s.Handler()
	tests := []struct {
		name    string
		headers []string
		want    int
	}{
		{"first", []string{"X-Original-Method", "POST", "X-Original-URI", "/a?x=1", "X-Api-Key", "k1"}, 200},
		{"same path, other query", []string{"X-Original-Method", "POST", "X-Original-URI", "/a?x=2", "X-Api-Key", "k1"}, 429},
		{"Traefik's headers, same request", []string{"X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/a", "X-Api-Key", "k1"}, 429},
		{"other method", []string{"X-Original-Method", "GET", "X-Original-URI", "/a", "X-Api-Key", "k1"}, 200},
		{"other path", []string{"X-Original-Method", "POST", "X-Original-URI", "/b", "X-Api-Key", "k1"}, 200},
		{"other key", []string{"X-Original-Method", "POST", "X-Original-URI", "/a", "X-Api-Key", "k2"}, 200},
	}
	for _, tt := range tests {
		if w := auth(t, h, "", "203.0.113.7", tt.headers...); w.Code != tt.want {
			t.Errorf("%s: auth = %d, want %d", tt.name, w.Code, tt.want)
		}
	}
}

func TestForwardAuthGuard(t *testing.T) {
	s, clk := newService(t, serviceConfig)
	h := s.Handler()
	// The allow list skips every limit; the deny list refuses.
	for i := range 5 {
		if w := auth(t, h, "", "192.0.2.10"); w.Code != http.StatusOK || w.Header().Get("RateLimit") != "" {
			t.Fatalf("allow-listed #%d = %d (RateLimit %q), want 200 without limits", i, w.Code, w.Header().Get("RateLimit"))
		}
	}
	if w := auth(t, h, "", "198.51.100.20"); w.Code != http.StatusForbidden {
		t.Errorf("deny-listed = %d, want 403", w.Code)
	}
	// Two denials under login (a jail rule) ban the address from every
	// rule, for the jail's ban time.
	const ip = "203.0.113.50"
	codes := []int{}
	for range 5 {
		codes = append(codes, auth(t, h, "?rule=login", ip).Code)
	}
	want := []int{200, 200, 429, 429, 403}
	for i := range want {
		if codes[i] != want[i] {
			t.Fatalf("login codes = %v, want %v", codes, want)
		}
	}
	w := auth(t, h, "?rule=api", ip)
	if w.Code != http.StatusForbidden || w.Header().Get("Retry-After") == "" {
		t.Errorf("banned under api = %d (Retry-After %q), want 403 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	bans, err := s.admin.Bans(context.Background())
	if err != nil || len(bans) != 1 || bans[0].Jail != "abuse" || bans[0].Key != ip {
		t.Fatalf("Bans() = %+v, %v, want one ban of %s in abuse", bans, err, ip)
	}
	clk.Advance(12 * time.Minute) // past the ban, jitter included
	if w := auth(t, h, "?rule=api", ip); w.Code != http.StatusOK {
		t.Errorf("after the ban = %d, want 200", w.Code)
	}
}

func TestMetricsAndProbes(t *testing.T) {
	s, _ := newService(t, serviceConfig)
	h := s.Handler()
	for range 5 {
		auth(t, h, "", "203.0.113.7")
	}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200} {
		if w := do(t, h, http.MethodGet, path, ""); w.Code != want {
			t.Errorf("GET %s = %d, want %d", path, w.Code, want)
		}
	}
	w := do(t, h, http.MethodGet, "/metrics", "")
	body := w.Body.String()
	for _, want := range []string{
		`sluice_decisions_total{op="take",result="allowed",rule="api"} 3`,
		`sluice_decisions_total{op="take",result="denied",rule="api"} 2`,
		`sluice_decision_duration_seconds_count{rule="api"} 5`,
		`sluice_http_requests_total{code="429",handler="auth"} 2`,
		`sluice_http_requests_total{code="200",handler="readyz"} 1`,
		`sluice_store_errors_total 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, "203.0.113.7") {
		t.Error("/metrics names a key: label cardinality must not grow with clients")
	}
}

func TestReload(t *testing.T) {
	s, _ := newService(t, serviceConfig)
	h := s.Handler()
	for range 2 {
		auth(t, h, "", "203.0.113.7")
	}
	// The rules that stay keep their counters; a new rule appears.
	next := strings.Replace(serviceConfig, "rules:\n", "rules:\n  - name: extra\n    limits: [\"1/s\"]\n", 1)
	c, err := config.Parse("next.yaml", []byte(next))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(c); err != nil {
		t.Fatalf("Reload = %v", err)
	}
	if w := auth(t, h, "", "203.0.113.7"); w.Header().Get("RateLimit") != `"api";r=0;t=60` {
		t.Errorf("after reload RateLimit = %q, want %q (2 taken before, 1 now, of 3)", w.Header().Get("RateLimit"), `"api";r=0;t=60`)
	}
	if w := auth(t, h, "", "203.0.113.7"); w.Code != http.StatusTooManyRequests {
		t.Errorf("4th take across a reload = %d, want 429", w.Code)
	}
	if w := auth(t, h, "?rule=extra", "203.0.113.7"); w.Code != http.StatusOK {
		t.Errorf("new rule = %d, want 200", w.Code)
	}

	// Changes a reload cannot make are rejected; the old configuration
	// keeps serving.
	for _, bad := range []string{
		next + "store: {type: redis, redis: {addrs: [\"127.0.0.1:1\"]}}\n",
		next + "listen: 127.0.0.1:9\n",
		strings.Replace(next, "admin:\n  token: test-token-0123456789\n", "", 1),
	} {
		c, err := config.Parse("bad.yaml", []byte(bad))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Reload(c); err == nil {
			t.Errorf("Reload(%q) = nil, want an error", bad)
		}
	}
	if s.Config().Rules[0].Name != "extra" {
		t.Errorf("after rejected reloads rules = %v, want the last good ones", s.Config().Rules)
	}

	// A file that does not parse is rejected by ReloadFile.
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte("rules: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadFile(path); err == nil {
		t.Error("ReloadFile(malformed) = nil, want an error")
	}
	if err := os.WriteFile(path, []byte(serviceConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadFile(path); err != nil {
		t.Errorf("ReloadFile(good) = %v", err)
	}
	body := do(t, h, http.MethodGet, "/metrics", "").Body.String()
	for _, want := range []string{`sluice_config_reloads_total{result="success"} 2`, `sluice_config_reloads_total{result="failure"} 4`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestWatchConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(path, []byte(serviceConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	reloads := make(chan struct{}, 10)
	done := make(chan error, 1)
	go func() { done <- WatchConfig(ctx, path, func() { reloads <- struct{}{} }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("WatchConfig = %v", err)
		}
	})
	// The watcher is running once it sees a change: write until it does,
	// then replace the file by a rename, as editors do.
	deadline := time.Now().Add(10 * time.Second)
	seen := false
	for !seen && time.Now().Before(deadline) {
		if err := os.WriteFile(path, []byte(serviceConfig+"# edit\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		select {
		case <-reloads:
			seen = true
		case <-time.After(500 * time.Millisecond):
		}
	}
	if !seen {
		t.Fatal("no reload after writing the file")
	}
	tmp := filepath.Join(dir, ".sluice.yaml.swp")
	if err := os.WriteFile(tmp, []byte(serviceConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reloads:
	case <-time.After(10 * time.Second):
		t.Fatal("no reload after the file was replaced by a rename")
	}
}

// TestDomainMetrics checks that decisions of descriptor domains are
// counted under the domain's name, by the store the domain was wired to.
func TestDomainMetrics(t *testing.T) {
	s, _ := newService(t, `rules:
  - name: api
    limits: ["3/min"]
  - domain: "edge.v2"
    descriptors: [{key: remote_address, limits: ["1/min"]}]
`)
	for range 2 {
		_, err := s.Engine().Check(t.Context(), rules.Request{Domain: "edge.v2",
			Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "remote_address", Value: "203.0.113.7"}}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	body := do(t, s.Handler(), http.MethodGet, "/metrics", "").Body.String()
	for _, want := range []string{
		`sluice_decisions_total{op="take",result="allowed",rule="edge.v2"} 1`,
		`sluice_decisions_total{op="take",result="denied",rule="edge.v2"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, grepLines(body, "sluice_decisions_total"))
		}
	}
}
