package server

import (
	"encoding/json"
	"math"
	"net/http"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice/internal/rlstest"
	"github.com/sluicehq/sluice/server/httpapi"
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
		body, _ := json.Marshal(httpapi.CheckRequest{Rule: rule, Key: key})
		w := do(t, s.Handler(), http.MethodPost, "/v1/check", string(body))
		var cr httpapi.CheckResponse
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
			bans, err := s.Bans(t.Context())
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
