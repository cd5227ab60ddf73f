package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice/internal/testing/rlstest"
	"github.com/sluicehq/sluice/server/envoyrls"
	"github.com/sluicehq/sluice/server/forwardauth"
	"github.com/sluicehq/sluice/wire"
	"github.com/sluicehq/sluice/wire/sluicepb"
)

// doorsConfig has a door of every family: a named rule (rate checks,
// inserts, outcome calls), a login, a concurrency rule; forward-auth
// keyed by a header, so that a key that is no address reaches it too.
const doorsConfig = `rules:
  - name: api
    limits: ["100/min"]
  - name: reports
    concurrency: {limit: 5, ttl: 1m}
logins:
  - name: web
forward_auth:
  rule: api
  key: ["header:X-Key"]
guard:
  allow: [192.0.2.10]
  deny: [198.51.100.0/24]
admin:
  token: test-token-0123456789
`

// A doorActor is who knocks: the client's address, and the key it gives
// (the rule's key, the username of a login).
type doorActor struct{ addr, key string }

// A door asks the service about an actor through one API of one family,
// and returns what the guard did: "allow-list", "deny-list", "banned", or
// "" when it let the request through to the rule.
type door struct {
	name string
	ask  func(t *testing.T, d *doorService, a doorActor) string
}

// doorService is a Service with a gRPC client of its three gRPC APIs.
type doorService struct {
	s      *Service
	rls    pb.RateLimitServiceClient
	limits sluicepb.LimitsClient
	leases sluicepb.LeasesClient
	n      int // a fresh request id per outcome call
}

func newDoorService(t *testing.T) *doorService {
	s, _ := newService(t, doorsConfig)
	g := envoyrls.NewServer(s.RateLimitService())
	s.LimitsService().Register(g)
	s.LeasesService().Register(g)
	conn := rlstest.ServeGRPC(t, g)
	return &doorService{s: s, rls: pb.NewRateLimitServiceClient(conn), limits: sluicepb.NewLimitsClient(conn), leases: sluicepb.NewLeasesClient(conn)}
}

// postJSON posts body to path and decodes the answer into out.
func (d *doorService) postJSON(t *testing.T, path string, body, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	w := do(t, d.s.Handler(), http.MethodPost, path, string(b))
	if w.Code != http.StatusOK {
		t.Fatalf("POST %s %s = %d %s", path, b, w.Code, w.Body)
	}
	if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
}

// authVerdict reads what forward-auth's answer says of the guard.
func authVerdict(w *httptest.ResponseRecorder) string {
	switch {
	case w.Header().Get(forwardauth.ExemptHeader) != "":
		return "allow-list"
	case w.Code == http.StatusForbidden && w.Header().Get("Retry-After") != "":
		return "banned"
	case w.Code == http.StatusForbidden:
		return "deny-list"
	}
	return ""
}

func (d *doorService) id() string { d.n++; return fmt.Sprint("req-", d.n) }

var doors = []door{
	{"check http", func(t *testing.T, d *doorService, a doorActor) string {
		var r wire.CheckResponse
		d.postJSON(t, "/v1/check", wire.CheckRequest{Rule: "api", Key: a.key}, &r)
		return r.Guard
	}},
	{"check envoy grpc", func(t *testing.T, d *doorService, a doorActor) string {
		return rlsOutcome(rlstest.ShouldRateLimit(t, d.rls, rlsRequest("api", a.key))).guard
	}},
	{"check envoy json", func(t *testing.T, d *doorService, a doorActor) string {
		body, _ := protojson.Marshal(rlsRequest("api", a.key))
		w := do(t, d.s.Handler(), http.MethodPost, "/json", string(body))
		var resp pb.RateLimitResponse
		if err := protojson.Unmarshal(w.Body.Bytes(), &resp); err != nil || len(resp.Statuses) != 1 {
			t.Fatalf("POST /json = %d %s", w.Code, w.Body)
		}
		return rlsOutcome(&resp).guard
	}},
	{"check forward-auth", func(t *testing.T, d *doorService, a doorActor) string {
		return authVerdict(auth(t, d.s.Handler(), "?rule=api", a.addr, "X-Key", a.key))
	}},
	{"insert http", func(t *testing.T, d *doorService, a doorActor) string {
		var r wire.CheckResponse
		d.postJSON(t, "/v1/insert", wire.InsertRequest{Rule: "api", Key: a.key, Cost: 1}, &r)
		return r.Guard
	}},
	{"insert grpc", func(t *testing.T, d *doorService, a doorActor) string {
		r, err := d.limits.Insert(t.Context(), &sluicepb.InsertRequest{Rule: "api", Key: a.key, Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetGuard()
	}},
	{"reserve http", func(t *testing.T, d *doorService, a doorActor) string {
		var r wire.OutcomeResponse
		d.postJSON(t, "/v1/reserve", wire.OutcomeRequest{Rule: "api", Key: a.key, ID: d.id()}, &r)
		return r.Guard
	}},
	{"report grpc", func(t *testing.T, d *doorService, a doorActor) string {
		r, err := d.limits.Report(t.Context(), &sluicepb.OutcomeRequest{Rule: "api", Key: a.key, Id: d.id(), Outcome: sluicepb.Outcome_OUTCOME_FAILURE})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetDecision().GetGuard()
	}},
	{"login http", func(t *testing.T, d *doorService, a doorActor) string {
		var r wire.LoginResponse
		d.postJSON(t, "/v1/login/begin", wire.LoginRequest{Login: "web", Address: a.addr, User: a.key}, &r)
		return r.Guard
	}},
	{"login grpc", func(t *testing.T, d *doorService, a doorActor) string {
		r, err := d.limits.LoginBegin(t.Context(), &sluicepb.LoginRequest{Login: "web", Address: a.addr, User: a.key})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetGuard()
	}},
	{"login forward-auth", func(t *testing.T, d *doorService, a doorActor) string {
		return authVerdict(auth(t, d.s.Handler(), "?login=web", a.addr, forwardauth.UserHeader, a.key))
	}},
	{"lease http", func(t *testing.T, d *doorService, a doorActor) string {
		var r wire.LeaseResponse
		d.postJSON(t, "/v1/acquire", wire.AcquireRequest{Rule: "reports", Key: a.key}, &r)
		return r.Guard
	}},
	{"lease grpc", func(t *testing.T, d *doorService, a doorActor) string {
		r, err := d.leases.Acquire(t.Context(), &sluicepb.AcquireRequest{Rule: "reports", Key: a.key})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetGuard()
	}},
}

// TestOneGuardOnEveryDoor pins the guard's one order on every door of
// every family, through every transport: rate checks (HTTP, Envoy's gRPC
// and /json, forward-auth), inserts and outcome calls, logins (HTTP,
// gRPC, forward-auth), leases (HTTP, gRPC). An address ban, a network
// ban, a key ban (the key of a rule, a login's username), a deny entry
// and an allow entry are each decided alike by all; an actor none of them
// names passes to its rule.
func TestOneGuardOnEveryDoor(t *testing.T) {
	d := newDoorService(t)
	ctx := t.Context()
	for _, ban := range []string{"203.0.113.7", "203.0.113.128/25", "key:tenant-bad"} {
		if _, err := d.s.admin.Ban(ctx, ManualJail, banEntry(ban), time.Hour, "test"); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name  string
		actor doorActor
		want  string
	}{
		{"address ban", doorActor{"203.0.113.7", "203.0.113.7"}, "banned"},
		{"network ban", doorActor{"203.0.113.200", "203.0.113.200"}, "banned"},
		{"key ban", doorActor{"100.64.0.9", "tenant-bad"}, "banned"},
		{"deny entry", doorActor{"198.51.100.20", "198.51.100.20"}, "deny-list"},
		{"allow entry", doorActor{"192.0.2.10", "192.0.2.10"}, "allow-list"},
		{"none", doorActor{"100.64.0.8", "100.64.0.8"}, ""},
	}
	for _, tt := range cases {
		var got []string
		for _, dr := range doors {
			if v := dr.ask(t, d, tt.actor); v != tt.want {
				got = append(got, fmt.Sprintf("%s: %q", dr.name, v))
			}
		}
		if len(got) > 0 {
			t.Errorf("%s (%s, %s): want %q on every door, got %s", tt.name, tt.actor.addr, tt.actor.key, tt.want, strings.Join(got, "; "))
		}
	}
}
