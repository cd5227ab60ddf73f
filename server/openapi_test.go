package server

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/sluicehq/sluice/server/httpapi"
)

// openAPIConfig is serviceConfig with a descriptor domain, so that every
// form of request the description names has a rule to apply.
var openAPIConfig = strings.Replace(serviceConfig, "forward_auth:", `  - domain: edge
    descriptors: [{key: remote_address, limits: ["1/min"]}]
  - name: reports
    concurrency: {limit: 1, ttl: 1m}
logins:
  - {name: web}
forward_auth:`, 1)

// An apiCase is one exchange with the service, to be checked against
// the OpenAPI description: the request, and the status and a fragment of
// the body the handler must answer with.
type apiCase struct {
	name        string
	method      string
	path        string // with the query
	contentType string // default application/json when body is set
	body        string
	forwarded   string // X-Forwarded-For, for /v1/auth
	status      int
	want        string // in the body
	// invalid marks a request that breaks the description: the validator
	// must refuse it, and the handler answer it with an error the
	// description documents.
	invalid bool
}

// openAPICases are run in order, on one service: the denials follow the
// takes that spend their limits (api allows 3 a minute, edge 1).
func openAPICases() []apiCase {
	const check, reset = "/v1/check", "/v1/reset"
	return []apiCase{
		{name: "check", method: "POST", path: check, body: `{"rule":"api","key":"k1"}`, status: 200, want: `"allowed":true`},
		{name: "peek", method: "POST", path: check, body: `{"rule":"api","key":"k1","peek":true}`, status: 200, want: `"remaining":1`},
		{name: "spend", method: "POST", path: check, body: `{"rule":"api","key":"k2","cost":3}`, status: 200, want: `"allowed":true`},
		{name: "denied", method: "POST", path: check, body: `{"rule":"api","key":"k2"}`, status: 200, want: `"allowed":false`},
		{name: "allow-listed", method: "POST", path: check, body: `{"rule":"api","key":"203.0.113.99"}`, status: 200, want: `"guard":"allow-list"`},
		{name: "deny-listed", method: "POST", path: check, body: `{"rule":"api","key":"198.51.100.7"}`, status: 200, want: `"guard":"deny-list"`},
		{name: "descriptors", method: "POST", path: check, body: `{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"203.0.113.7"}]}]}`, status: 200, want: `"statuses":[{`},
		{name: "descriptors denied", method: "POST", path: check, body: `{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"203.0.113.7"}]}]}`, status: 200, want: `"allowed":false`},
		{name: "batch", method: "POST", path: check, body: `{"checks":[{"rule":"login","key":"k3"},{"rule":"nope","key":"k3"}]}`, status: 200, want: `"error":"unknown rule`},
		{name: "reset", method: "POST", path: reset, body: `{"rule":"api","key":"k2"}`, status: 204},
		{name: "reset descriptors", method: "POST", path: reset, body: `{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"203.0.113.7"}]}]}`, status: 204},
		{name: "after reset", method: "POST", path: check, body: `{"rule":"api","key":"k2"}`, status: 200, want: `"remaining":2`},
		{name: "bad JSON", method: "POST", path: check, body: `{"rule":`, status: 400, want: "malformed request", invalid: true},
		{name: "unknown field", method: "POST", path: check, body: `{"rule":"api","key":"k","cots":2}`, status: 400, want: "cots", invalid: true},
		{name: "unknown rule", method: "POST", path: check, body: `{"rule":"nope","key":"k"}`, status: 400, want: `unknown rule \"nope\"`},
		{name: "unknown rule reset", method: "POST", path: reset, body: `{"rule":"nope","key":"k"}`, status: 400, want: "unknown rule"},
		{name: "cost above burst", method: "POST", path: check, body: `{"rule":"api","key":"k","cost":4}`, status: 400, want: "exceeds the burst"},
		{name: "too large", method: "POST", path: check, body: `{"rule":"api","key":"` + strings.Repeat("x", httpapi.DefaultMaxBodyBytes) + `"}`, status: 413, want: "too large"},
		{name: "text/plain", method: "POST", path: check, contentType: "text/plain", body: `{"rule":"api","key":"k"}`, status: 415, want: "application/json", invalid: true},
		{name: "auth", method: "GET", path: "/v1/auth", forwarded: "203.0.113.20", status: 200},
		{name: "auth spend", method: "GET", path: "/v1/auth", forwarded: "203.0.113.20", status: 200},
		{name: "auth spent", method: "GET", path: "/v1/auth", forwarded: "203.0.113.20", status: 200},
		{name: "auth denied", method: "GET", path: "/v1/auth", forwarded: "203.0.113.20", status: 429, want: "quota-exceeded"},
		{name: "auth denied 403", method: "GET", path: "/v1/auth?deny_status=403", forwarded: "203.0.113.20", status: 403, want: `"violated-policies":["api"]`},
		{name: "auth deny-listed", method: "GET", path: "/v1/auth?rule=login", forwarded: "198.51.100.7", status: 403, want: "deny list"},
		{name: "auth allow-listed", method: "GET", path: "/v1/auth", forwarded: "192.0.2.10", status: 200},
		{name: "auth unknown rule", method: "GET", path: "/v1/auth?rule=nope", forwarded: "203.0.113.20", status: 400, want: "unknown rule"},
		{name: "auth bad deny_status", method: "GET", path: "/v1/auth?deny_status=500", forwarded: "203.0.113.20", status: 400, want: "deny_status", invalid: true},
		{name: "insert", method: "POST", path: "/v1/insert", body: `{"rule":"api","key":"k4","cost":2}`, status: 200, want: `"remaining":0`},
		{name: "reward", method: "POST", path: "/v1/insert", body: `{"rule":"api","key":"k4","cost":-2}`, status: 200, want: `"remaining":2`},
		{name: "insert 0", method: "POST", path: "/v1/insert", body: `{"rule":"api","key":"k4","cost":0}`, status: 400, want: "cost is required"},
		{name: "reserve", method: "POST", path: "/v1/reserve", body: `{"rule":"api","key":"k5","id":"r1"}`, status: 200, want: `"expires":`},
		{name: "reserve again", method: "POST", path: "/v1/reserve", body: `{"rule":"api","key":"k5","id":"r1"}`, status: 200, want: `"duplicate":true`},
		{name: "commit", method: "POST", path: "/v1/commit", body: `{"rule":"api","key":"k5","id":"r1"}`, status: 200, want: `"allowed":true`},
		{name: "refund committed", method: "POST", path: "/v1/refund", body: `{"rule":"api","key":"k5","id":"r1"}`, status: 200, want: `"duplicate":true`},
		{name: "refund unknown", method: "POST", path: "/v1/refund", body: `{"rule":"api","key":"k5","id":"r2"}`, status: 409, want: "no such reservation"},
		{name: "commit unknown", method: "POST", path: "/v1/commit", body: `{"rule":"api","key":"k5","id":"r3"}`, status: 409, want: "no such reservation"},
		{name: "report", method: "POST", path: "/v1/report", body: `{"rule":"api","key":"k6","id":"f1","outcome":"failure"}`, status: 200, want: `"allowed":true`},
		{name: "report unknown outcome", method: "POST", path: "/v1/report", body: `{"rule":"api","key":"k6","id":"f1","outcome":"maybe"}`, status: 400, want: "unknown outcome", invalid: true},
		{name: "login begin", method: "POST", path: "/v1/login/begin", body: `{"login":"web","user":"alice","address":"192.0.2.77"}`, status: 200, want: `"ticket":"`},
		{name: "login unknown", method: "POST", path: "/v1/login/begin", body: `{"login":"nope","user":"alice","address":"192.0.2.77"}`, status: 400, want: "unknown login"},
		{name: "login fail", method: "POST", path: "/v1/login/fail", body: `{"login":"web","user":"alice","address":"192.0.2.77","ticket":"7"}`, status: 200, want: `{`},
		{name: "login succeed", method: "POST", path: "/v1/login/succeed", body: `{"login":"web","user":"alice","address":"192.0.2.77","ticket":"8"}`, status: 200, want: `{`},
		{name: "login bad ticket", method: "POST", path: "/v1/login/succeed", body: `{"login":"web","user":"alice","address":"192.0.2.77","ticket":"x"}`, status: 400, want: "invalid login ticket"},
		{name: "acquire", method: "POST", path: "/v1/acquire", body: `{"rule":"reports","key":"k","class":"critical"}`, status: 200, want: `"ok":true`},
		{name: "acquire full", method: "POST", path: "/v1/acquire", body: `{"rule":"reports","key":"k"}`, status: 200, want: `"ok":false`},
		{name: "extend unknown", method: "POST", path: "/v1/extend", body: `{"rule":"reports","key":"k","id":"nope"}`, status: 200, want: `"ok":false`},
		{name: "release unknown", method: "POST", path: "/v1/release", body: `{"rule":"reports","key":"k","id":"nope"}`, status: 200, want: `"ok":false`},
		{name: "acquire bad class", method: "POST", path: "/v1/acquire", body: `{"rule":"reports","key":"k","class":"vip"}`, status: 400, want: "class", invalid: true},
		{name: "healthz", method: "GET", path: "/healthz", status: 200, want: `"ok"`},
		{name: "readyz", method: "GET", path: "/readyz", status: 200, want: `"ready"`},
		{name: "openapi", method: "GET", path: "/openapi.yaml", status: 200, want: "openapi: 3.1"},
	}
}

// TestOpenAPI checks the OpenAPI description against the service's
// handlers: each request of openAPICases, and the handler's answer, must
// be what the description says (or, for an invalid request, be refused by
// it), and every operation it describes must be exercised.
func TestOpenAPI(t *testing.T) {
	router := openAPIRouter(t)
	s, _ := newService(t, openAPIConfig)
	h := s.Handler()
	seen := map[string]bool{}
	for _, c := range openAPICases() {
		op := exchange(t, router, h, c)
		seen[op] = true
	}
	for _, op := range describedOperations(router) {
		if !seen[op] {
			t.Errorf("the description's %s is exercised by no case of openAPICases", op)
		}
	}
}

// openAPIRouter loads and validates the description, and returns a
// router over it that matches any host.
func openAPIRouter(t *testing.T) *openAPIDoc {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(httpapi.OpenAPI())
	if err != nil {
		t.Fatalf("loading openapi.yaml: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("openapi.yaml is not a valid description: %v", err)
	}
	doc.Servers = nil // match the test requests' host
	r, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("legacy.NewRouter: %v", err)
	}
	return &openAPIDoc{doc: doc, router: r}
}

// openAPIDoc is a loaded description and a router over it.
type openAPIDoc struct {
	doc    *openapi3.T
	router routers.Router
}

// describedOperations returns every "METHOD path" the description has.
func describedOperations(d *openAPIDoc) []string {
	var ops []string
	for path, item := range d.doc.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, method+" "+path)
		}
	}
	slices.Sort(ops)
	return ops
}

// exchange sends c's request to h, checks the answer's status and body
// fragment, validates both against the description, and returns the
// operation it exercised, "METHOD path".
func exchange(t *testing.T, d *openAPIDoc, h http.Handler, c apiCase) string {
	t.Helper()
	r := newCaseRequest(c)
	route, params, err := d.router.FindRoute(r)
	if err != nil {
		t.Errorf("%s: %s %s is not in the description: %v", c.name, c.method, c.path, err)
		return ""
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route}
	err = openapi3filter.ValidateRequest(context.Background(), in)
	switch {
	case err != nil && !c.invalid:
		t.Errorf("%s: the description refuses the request: %v", c.name, err)
	case err == nil && c.invalid:
		t.Errorf("%s: the description accepts the invalid request %q", c.name, c.body)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, newCaseRequest(c)) // the validator read r's body
	if w.Code != c.status || !strings.Contains(w.Body.String(), c.want) {
		t.Errorf("%s: %s %s = %d %.200s; want %d and %q", c.name, c.method, c.path, w.Code, w.Body, c.status, c.want)
	}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: w.Code, Header: w.Header(),
		Body:    io.NopCloser(bytes.NewReader(w.Body.Bytes())),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
	if err != nil {
		t.Errorf("%s: the answer %d %.200s breaks the description: %v", c.name, w.Code, w.Body, err)
	}
	return route.Method + " " + route.Path
}

// newCaseRequest returns c's request, as a client on loopback sends it
// (the forward-auth endpoint trusts loopback's X-Forwarded-For).
func newCaseRequest(c apiCase) *http.Request {
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	r := httptest.NewRequest(c.method, c.path, body)
	r.RemoteAddr = "127.0.0.1:40000"
	if c.body != "" {
		r.Header.Set("Content-Type", cmp.Or(c.contentType, "application/json"))
	}
	if c.forwarded != "" {
		r.Header.Set("X-Forwarded-For", c.forwarded)
	}
	return r
}
