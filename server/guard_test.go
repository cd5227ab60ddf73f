package server

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testing/rlstest"
	"github.com/sluicehq/sluice/wire"
)

// outcome is an API's answer to one check, in common terms.
type outcome struct {
	allowed bool
	guard   string        // "allow-list", "deny-list", "banned", or "" when the limits decided
	wait    time.Duration // Retry-After (HTTP) or duration_until_reset of a denial (gRPC)
}

// guardAPIs ask a Service about a key under a named rule, through each
// API that consults the guard on a rule's key.
var guardAPIs = []struct {
	name string
	ask  func(t *testing.T, s *Service, rule, key string) outcome
}{
	{"http", func(t *testing.T, s *Service, rule, key string) outcome {
		t.Helper()
		body, _ := json.Marshal(wire.CheckRequest{Rule: rule, Key: key})
		w := do(t, s.Handler(), http.MethodPost, "/v1/check", string(body))
		var cr wire.CheckResponse
		if err := json.Unmarshal(w.Body.Bytes(), &cr); w.Code != http.StatusOK || err != nil {
			t.Fatalf("POST /v1/check %s = %d %s, want 200", body, w.Code, w.Body)
		}
		ra := w.Header().Get("Retry-After")
		if (cr.RetryAfter > 0) != (ra != "") {
			t.Errorf("check %s: retry_after %v but Retry-After %q", body, cr.RetryAfter, ra)
		}
		if cr.Guard == "allow-list" && (cr.Limit != 0 || w.Header().Get("RateLimit") != "") {
			t.Errorf("allow-listed check %s = %+v, RateLimit %q; want no limit described", body, cr, w.Header().Get("RateLimit"))
		}
		return outcome{cr.Allowed, cr.Guard, time.Duration(cr.RetryAfter * float64(time.Second))}
	}},
	{"grpc", func(t *testing.T, s *Service, rule, key string) outcome {
		t.Helper()
		return rlsOutcome(rlstest.ShouldRateLimit(t, serveGRPC(t, s), rlsRequest(rule, key)))
	}},
	{"json", func(t *testing.T, s *Service, rule, key string) outcome {
		t.Helper()
		body, err := protojson.Marshal(rlsRequest(rule, key))
		if err != nil {
			t.Fatal(err)
		}
		w := do(t, s.Handler(), http.MethodPost, "/json", string(body))
		var resp pb.RateLimitResponse
		if err := protojson.Unmarshal(w.Body.Bytes(), &resp); err != nil || (w.Code == http.StatusOK) != (resp.OverallCode == pb.RateLimitResponse_OK) ||
			(w.Code != http.StatusOK && w.Code != http.StatusTooManyRequests) {
			t.Fatalf("POST /json %s = %d %s, want 200 or 429 with a response", body, w.Code, w.Body)
		}
		return rlsOutcome(&resp)
	}},
}

// rlsRequest is the request of Envoy's API for key under a named rule.
func rlsRequest(rule, key string) *pb.RateLimitRequest {
	return &pb.RateLimitRequest{Domain: rule, Descriptors: []*rlv3.RateLimitDescriptor{rlstest.Descriptor("key=" + key)}}
}

// rlsOutcome reads an answer of Envoy's API for one descriptor.
func rlsOutcome(resp *pb.RateLimitResponse) outcome {
	st := resp.Statuses[0]
	o := outcome{allowed: resp.OverallCode == pb.RateLimitResponse_OK}
	if !o.allowed {
		o.wait = st.DurationUntilReset.AsDuration()
	}
	// What Envoy's API says of each verdict of the guard.
	switch {
	case o.allowed && st.LimitRemaining == math.MaxUint32:
		o.guard = "allow-list"
	case !o.allowed && o.wait == 0:
		o.guard = "deny-list"
	case !o.allowed && o.wait > time.Minute: // the rules' windows are a minute
		o.guard = "banned"
	}
	return o
}

// TestGuardOnEveryAPI checks, on the HTTP check API and Envoy's API
// (gRPC and /json),
// what forward-auth already did: the lists apply to a named rule's key
// (an allow-listed key passes without counting, a deny-listed one is
// refused), the denials of a rule a jail counts are strikes, and a banned
// key is refused with the ban's remaining time, on every API alike.
func TestGuardOnEveryAPI(t *testing.T) {
	for _, api := range guardAPIs {
		t.Run(api.name, func(t *testing.T) {
			s, clk := newService(t, serviceConfig)
			ask := func(rule, key string) outcome {
				t.Helper()
				return api.ask(t, s, rule, key)
			}
			// api allows 3 a minute: the allow list exempts the key
			// beyond it, by address and by key: entry.
			for _, key := range []string{"192.0.2.10", "203.0.113.99"} {
				for i := range 5 {
					if o := ask("api", key); !o.allowed || o.guard != "allow-list" {
						t.Fatalf("allow-listed %s, check %d = %+v, want allowed by the allow list", key, i, o)
					}
				}
			}
			if o := ask("login", "198.51.100.20"); o.allowed || o.guard != "deny-list" || o.wait != 0 {
				t.Errorf("deny-listed = %+v, want refused by the deny list, no wait", o)
			}

			// login allows 2 a minute; the jail bans after 2 denials.
			const ip = "203.0.113.50"
			var got []outcome
			for range 5 {
				got = append(got, ask("login", ip))
			}
			want := []bool{true, true, false, false, false}
			for i, o := range got {
				if o.allowed != want[i] || (i < 4) != (o.guard == "") {
					t.Fatalf("login checks = %+v, want allowed twice, denied twice by the limit, then banned", got)
				}
			}
			if ban := got[4]; ban.guard != "banned" || ban.wait < 10*time.Minute || ban.wait > 11*time.Minute+time.Second {
				t.Errorf("banned check = %+v, want the ban's 10m (+10%% jitter) to wait", ban)
			}
			bans, err := s.admin.Bans(t.Context())
			if err != nil || len(bans) != 1 || bans[0].Jail != "abuse" || bans[0].Key != ip {
				t.Fatalf("Bans() = %+v, %v; want one ban of %s in abuse", bans, err, ip)
			}
			// The ban is the fleet's: forward-auth refuses the address.
			if w := auth(t, s.Handler(), "?rule=api", ip); w.Code != http.StatusForbidden || w.Header().Get("Retry-After") == "" {
				t.Errorf("forward-auth of the banned address = %d (Retry-After %q), want 403 with Retry-After", w.Code, w.Header().Get("Retry-After"))
			}
			// A ban refuses the actor under every rule, as forward-auth
			// and guard.Middleware do, not only under the jail's rules.
			if o := ask("api", ip); o.allowed || o.guard != "banned" {
				t.Errorf("banned key under api (no jail) = %+v, want banned", o)
			}
			clk.Advance(12 * time.Minute) // past the ban, jitter included
			if o := ask("login", ip); !o.allowed || o.guard != "" {
				t.Errorf("after the ban = %+v, want allowed by the limits", o)
			}
		})
	}
}

// TestGuardBannedByForwardAuth checks the other way round: an address
// forward-auth's denials banned is refused by the check API too.
func TestGuardBannedByForwardAuth(t *testing.T) {
	s, _ := newService(t, serviceConfig)
	const ip = "203.0.113.60"
	for range 4 {
		auth(t, s.Handler(), "?rule=login", ip)
	}
	for _, api := range guardAPIs {
		if o := api.ask(t, s, "login", ip); o.allowed || o.guard != "banned" || o.wait < 10*time.Minute {
			t.Errorf("%s: check of an address banned through forward-auth = %+v, want banned", api.name, o)
		}
	}
}

// sameConfig has an address and a key on both lists, and a limit of one
// a minute, so that three asks tell the allow list (three admissions)
// from the limits (one).
const sameConfig = `rules:
  - name: api
    limits: ["1/min"]
forward_auth:
  rule: api
  key: ["header:X-Api-Key"]
guard:
  allow: [192.0.2.77, "key:both-key"]
  deny: [192.0.2.77, "key:both-key", 192.0.2.0/24]
  jails:
    - {name: abuse, rules: [api], max_failures: 5}
`

// surfaces ask about an actor (an address and a key, either may be
// empty) through every surface that applies the guard, and name what
// each answer says: "allowed", "limited" (the limits denied), "refused"
// (the deny list) or "banned".
func surfaces(t *testing.T, s *Service) map[string]func(addr, key string) string {
	t.Helper()
	st := s.state.Load()
	var jails []*guard.Jail
	for _, j := range st.jails {
		jails = append(jails, j)
	}
	lim, err := sluice.New(s.st.primary, sluice.Config{Limits: []sluice.Limit{sluice.PerMinute(1)}, Action: "middleware"})
	if err != nil {
		t.Fatal(err)
	}
	limits, err := httplimit.New(httplimit.Config{Rules: []httplimit.Rule{{Limiter: lim, Key: httplimit.KeyFunc(func(r *http.Request) (string, bool) {
		return r.RemoteAddr + "|" + r.Header.Get("X-Api-Key"), true
	})}}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mw := guard.Middleware(guard.MiddlewareConfig{Allow: st.allow, Deny: st.deny, Jails: jails,
		Key: httplimit.Header("X-Api-Key"), Logger: slog.New(slog.DiscardHandler)})(limits.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	grpcc := serveGRPC(t, s)
	actor := func(addr, key string) string { return cmp.Or(key, addr) }
	fromAPI := func(o outcome) string {
		switch {
		case o.allowed:
			return "allowed"
		case o.guard == "deny-list":
			return "refused"
		case o.guard == "banned":
			return "banned"
		}
		return "limited"
	}
	return map[string]func(addr, key string) string{
		"guard.Middleware": func(addr, key string) string {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = net.JoinHostPort(cmp.Or(addr, neutral), "1")
			r.Header.Set("X-Api-Key", key)
			w := httptest.NewRecorder()
			mw.ServeHTTP(w, r)
			return httpVerdict(w)
		},
		"forward-auth": func(addr, key string) string {
			return httpVerdict(auth(t, s.Handler(), "", cmp.Or(addr, neutral), "X-Api-Key", key))
		},
		"/v1/check": func(addr, key string) string { return fromAPI(guardAPIs[0].ask(t, s, "api", actor(addr, key))) },
		"gRPC": func(addr, key string) string {
			return fromAPI(rlsOutcome(rlstest.ShouldRateLimit(t, grpcc, rlsRequest("api", actor(addr, key)))))
		},
		"/json": func(addr, key string) string { return fromAPI(guardAPIs[2].ask(t, s, "api", actor(addr, key))) },
	}
}

// neutral is the address of an actor known by its key only, on no list.
const neutral = "198.18.1.1"

// httpVerdict names an HTTP surface's answer: 200 allowed, 429 limited,
// 403 refused, or banned with a Retry-After.
func httpVerdict(w *httptest.ResponseRecorder) string {
	switch {
	case w.Code == http.StatusOK:
		return "allowed"
	case w.Code == http.StatusForbidden && w.Header().Get("Retry-After") != "":
		return "banned"
	case w.Code == http.StatusForbidden:
		return "refused"
	}
	return "limited"
}

// TestGuardSameEverywhere decides an address and a key that are on both
// lists, an address in a banned network, a jailed address and a jailed
// key through guard.Middleware, /v1/check, /json, gRPC and forward-auth:
// every surface decides each alike, in the guard's one order (the allow
// list first, then the deny list, then bans).
func TestGuardSameEverywhere(t *testing.T) {
	s, _ := newService(t, sameConfig)
	ctx := t.Context()
	for _, b := range []struct{ jail, key string }{{ManualJail, "203.0.113.0/24"}, {"abuse", "198.18.0.5"}, {"abuse", "mallory-key"}} {
		if _, err := s.admin.Ban(ctx, b.jail, banEntry(b.key), time.Hour, "test"); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, addr, key string
		want            string // three asks
	}{
		{"address on both lists", "192.0.2.77", "", "allowed allowed allowed"},
		{"key on both lists", "", "both-key", "allowed allowed allowed"},
		{"denied network", "192.0.2.9", "", "refused refused refused"},
		{"banned network", "203.0.113.9", "", "banned banned banned"},
		{"banned network, IPv4-mapped", "::ffff:203.0.113.10", "", "banned banned banned"},
		{"jailed address", "198.18.0.5", "", "banned banned banned"},
		{"jailed key", "", "mallory-key", "banned banned banned"},
		{"neither", "198.18.0.6", "", "allowed limited limited"},
	}
	for name, ask := range surfaces(t, s) {
		for i, tt := range tests {
			var got []string
			for range 3 {
				// Each surface asks its own actor: one limit per surface.
				addr, key := tt.addr, tt.key
				if tt.name == "neither" {
					addr = fmt.Sprintf("198.18.%d.6", len(name)*10+i)
				}
				got = append(got, ask(addr, key))
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Errorf("%s: %s = %s, want %s", name, tt.name, g, tt.want)
			}
		}
	}
}

// TestJailJitter: a jail's jitter comes from the file: jitter: 0 bans
// for ban_time exactly, the default lengthens each ban by up to a tenth,
// and jitter: 0.5 by up to a half.
func TestJailJitter(t *testing.T) {
	for _, tt := range []struct {
		jitter   string // the jail's jitter field, "" for none
		min, max time.Duration
	}{
		{"jitter: 0", time.Hour, time.Hour},
		{"", time.Hour, 66 * time.Minute},
		{"jitter: 0.5", time.Hour, 90 * time.Minute},
	} {
		conf := "rules:\n  - {name: login, limits: [\"1/min\"]}\nguard:\n  jails:\n    - {name: j, rules: [login], max_failures: 1, ban_time: 1h"
		if tt.jitter != "" {
			conf += ", " + tt.jitter
		}
		s, clk := newService(t, conf+"}\n")
		for range 3 {
			do(t, s.Handler(), http.MethodPost, "/v1/check", `{"rule":"login","key":"203.0.113.7"}`)
		}
		bans := s.st.registry.Bans().List(clk.Now())
		if len(bans) != 1 {
			t.Fatalf("%q: bans %v, want one", tt.jitter, bans)
		}
		if d := bans[0].Until.Sub(bans[0].Since); d < tt.min || d > tt.max {
			t.Errorf("with %q, ban_time: 1h bans for %v, want %v to %v", cmp.Or(tt.jitter, "no jitter field"), d, tt.min, tt.max)
		}
	}
}
