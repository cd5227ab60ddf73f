package httpapi

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testing/testclock"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/wire"
)

const domainConfig = `rules:
  - name: login
    limits: ["5/min"]
  - name: dry
    limits: ["1/min"]
    shadow: true
  - domain: edge
    descriptors:
      - key: ip
        limits: ["3/min"]
      - key: path
        value: /login
        descriptors:
          - key: ip
            limits: ["2/min"]
      - key: path
        value: /health
        rate_limit: {unlimited: true}
`

// newDomainServer returns the API for domainConfig on a memory store.
func newDomainServer(t *testing.T, maxBatch int) *Handler {
	t.Helper()
	c, err := config.Parse("d.yaml", []byte(domainConfig))
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New(memory.Config{})
	t.Cleanup(func() { st.Close() })
	clk := testclock.New(t0)
	return newHandler(t, rules.Config{Store: st, Rules: c.Rules, Domains: c.Domains, Clock: clk.Now}, Config{MaxBatch: maxBatch})
}

// decodeInto decodes a 200 answer strictly.
func decodeInto(t *testing.T, w *http.Response, body []byte, v any) {
	t.Helper()
	if w.StatusCode != http.StatusOK {
		t.Fatalf("status %d %s, want 200", w.StatusCode, body)
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
}

func TestCheckDescriptors(t *testing.T) {
	s := newDomainServer(t, 0)
	const body = `{"domain":"edge","descriptors":[{"entries":[{"key":"ip","value":"203.0.113.7"}]},{"entries":[{"key":"path","value":"/login"},{"key":"ip","value":"203.0.113.7"}]}]}`
	var got []wire.CheckResponse
	for range 3 {
		w := do(t, s, http.MethodPost, "/v1/check", body)
		var r wire.CheckResponse
		decodeInto(t, w.Result(), w.Body.Bytes(), &r)
		got = append(got, r)
		if r.Allowed != (len(got) <= 2) {
			t.Errorf("check %d allowed = %v", len(got), r.Allowed)
		}
		if len(got) == 3 && (w.Header().Get("Retry-After") == "" || !strings.Contains(w.Header().Get("RateLimit"), `"edge.path_/login.ip";r=0`)) {
			t.Errorf("denied check: headers %v, want Retry-After and the /login limit's RateLimit", w.Header())
		}
	}
	want := wire.CheckResponse{
		Allowed: false, Rule: "edge.path_/login.ip", Limit: 2, Policy: "2/min", Remaining: 0, ResetAfter: 60, RetryAfter: 30,
		Statuses: []wire.DescriptorStatus{
			// The ip limit was refunded: the request was denied as a
			// whole, and the status says what is left after the refund
			// (and when a take now would be forgotten).
			{Allowed: true, Rule: "edge.ip", Limit: 3, Policy: "3/min", Remaining: 1, ResetAfter: 60},
			{Allowed: false, Rule: "edge.path_/login.ip", Limit: 2, Policy: "2/min", Remaining: 0, ResetAfter: 60, RetryAfter: 30},
		},
	}
	if !reflect.DeepEqual(got[2], want) {
		t.Errorf("3rd check = %+v, want %+v", got[2], want)
	}
	// The denied request took nothing from the ip limit: one left.
	w := do(t, s, http.MethodPost, "/v1/check", `{"domain":"edge","descriptors":[{"entries":[{"key":"ip","value":"203.0.113.7"}]}]}`)
	var r wire.CheckResponse
	decodeInto(t, w.Result(), w.Body.Bytes(), &r)
	if !r.Allowed || r.Remaining != 0 {
		t.Errorf("ip after the denial = %+v, want allowed with 0 left (3 - 2 - 1)", r)
	}

	w = do(t, s, http.MethodPost, "/v1/check", `{"domain":"edge","descriptors":[{"entries":[{"key":"path","value":"/health"}]},{"entries":[{"key":"nothing","value":"x"}]}]}`)
	r = wire.CheckResponse{}
	decodeInto(t, w.Result(), w.Body.Bytes(), &r)
	wantFree := wire.CheckResponse{Allowed: true, Statuses: []wire.DescriptorStatus{{Allowed: true, Rule: "edge.path_/health", Unlimited: true}, {Allowed: true}}}
	if !reflect.DeepEqual(r, wantFree) || w.Header().Get("RateLimit") != "" {
		t.Errorf("unlimited and unmatched = %+v (headers %v), want %+v without fields", r, w.Header(), wantFree)
	}
}

func TestCheckShadow(t *testing.T) {
	s := newDomainServer(t, 0)
	for i := range 3 {
		got, h := check(t, s, `{"rule":"dry","key":"k"}`)
		if !got.Allowed || got.Shadowed != (i > 0) || h.Get("Retry-After") != "" {
			t.Errorf("shadow check %d = %+v (Retry-After %q), want allowed, shadowed after the first", i, got, h.Get("Retry-After"))
		}
	}
}

func TestCheckBatch(t *testing.T) {
	s := newDomainServer(t, 3)
	body := `{"checks":[
		{"rule":"login","key":"a","cost":5},
		{"rule":"login","key":"a"},
		{"rule":"nope","key":"a"},
		{"domain":"edge","descriptors":[{"entries":[{"key":"ip","value":"x"}]}],"peek":true}
	]}`
	if w := do(t, s, http.MethodPost, "/v1/check", body); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "4 checks: at most 3") {
		t.Errorf("batch of 4 with MaxBatch 3 = %d %s, want 400", w.Code, w.Body)
	}
	s = newDomainServer(t, 0)
	w := do(t, s, http.MethodPost, "/v1/check", body)
	var got wire.BatchResponse
	decodeInto(t, w.Result(), w.Body.Bytes(), &got)
	if len(got.Results) != 4 {
		t.Fatalf("batch = %+v, want 4 results", got)
	}
	if r := got.Results[0]; !r.Allowed || r.Remaining != 0 {
		t.Errorf("result 0 = %+v, want allowed, 0 left", r)
	}
	if r := got.Results[1]; r.Allowed || r.RetryAfter != 12 {
		t.Errorf("result 1 = %+v, want denied, retry in 12s", r)
	}
	if r := got.Results[2]; r.Error == "" || !strings.Contains(r.Error, `unknown rule "nope"`) || r.Rule != "" {
		t.Errorf("result 2 = %+v, want only an error", r)
	}
	if r := got.Results[3]; !r.Allowed || r.Remaining != 2 || r.Statuses[0].Rule != "edge.ip" {
		t.Errorf("result 3 (peek) = %+v, want allowed, 2 left after a take", r)
	}
	if w.Header().Get("RateLimit") != "" {
		t.Errorf("batch answer has RateLimit %q, want none", w.Header().Get("RateLimit"))
	}
}

func TestResetDescriptors(t *testing.T) {
	s := newDomainServer(t, 0)
	const ip = `{"domain":"edge","descriptors":[{"entries":[{"key":"ip","value":"y"}]}]}`
	for range 3 {
		do(t, s, http.MethodPost, "/v1/check", ip)
	}
	if w := do(t, s, http.MethodPost, "/v1/reset", ip); w.Code != http.StatusNoContent {
		t.Fatalf("reset = %d %s, want 204", w.Code, w.Body)
	}
	w := do(t, s, http.MethodPost, "/v1/check", ip)
	var r wire.CheckResponse
	decodeInto(t, w.Result(), w.Body.Bytes(), &r)
	if !r.Allowed || r.Remaining != 2 {
		t.Errorf("check after reset = %+v, want allowed with 2 left", r)
	}
}

func TestCheckDescriptorErrors(t *testing.T) {
	s := newDomainServer(t, 0)
	tests := []struct {
		name, path, body, want string
	}{
		{"unknown domain", "/v1/check", `{"domain":"nope","descriptors":[{"entries":[{"key":"a","value":"b"}]}]}`, `unknown domain "nope" (want one of dry, edge, login)`},
		{"no descriptors", "/v1/check", `{"domain":"edge"}`, "descriptors are required"},
		{"empty descriptor", "/v1/check", `{"domain":"edge","descriptors":[{"entries":[]}]}`, "descriptor 0 has no entries"},
		{"rule and domain", "/v1/check", `{"rule":"login","key":"k","domain":"edge","descriptors":[{"entries":[{"key":"a","value":"b"}]}]}`, "not both"},
		{"descriptors without domain", "/v1/check", `{"rule":"login","key":"k","descriptors":[{"entries":[{"key":"a","value":"b"}]}]}`, "descriptors need a domain"},
		{"cost above burst", "/v1/check", `{"domain":"edge","descriptors":[{"entries":[{"key":"ip","value":"b"}]}],"cost":4}`, `cost 4 exceeds the burst of rule "edge.ip": at most 3`},
		{"batch and one", "/v1/check", `{"rule":"login","key":"k","checks":[{"rule":"login","key":"k"}]}`, "not both"},
		{"empty batch", "/v1/check", `{"checks":[]}`, "checks is empty"},
		{"unknown entry field", "/v1/check", `{"domain":"edge","descriptors":[{"entries":[{"key":"a","val":"b"}]}]}`, `unknown field "val"`},
		{"reset unknown domain", "/v1/reset", `{"domain":"nope","descriptors":[{"entries":[{"key":"a","value":"b"}]}]}`, `unknown domain "nope"`},
	}
	for _, tt := range tests {
		w := do(t, s, http.MethodPost, tt.path, tt.body)
		var e wire.ErrorResponse
		if w.Code != http.StatusBadRequest || json.Unmarshal(w.Body.Bytes(), &e) != nil || !strings.Contains(e.Error, tt.want) {
			t.Errorf("%s: POST %s %s = %d %s, want 400 containing %q", tt.name, tt.path, tt.body, w.Code, w.Body, tt.want)
		}
	}
	many := `{"domain":"edge","descriptors":[` + strings.Repeat(`{"entries":[{"key":"ip","value":"b"}]},`, 300) + `{"entries":[{"key":"ip","value":"b"}]}]}`
	if w := do(t, s, http.MethodPost, "/v1/check", many); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "too many descriptors") {
		t.Errorf("301 descriptors = %d %s, want 400 too many descriptors", w.Code, w.Body)
	}
}
