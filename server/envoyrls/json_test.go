package envoyrls_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice/server/envoyrls"
)

// postJSON posts body to h's /json as application/json and returns the
// recorded answer.
func postJSON(h http.Handler, method, body string) *httptest.ResponseRecorder {
	return postAs(h, method, "application/json", body)
}

// postAs posts body to h's /json as ctype.
func postAs(h http.Handler, method, ctype, body string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(method, "/json", strings.NewReader(body))
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	h.ServeHTTP(w, r)
	return w
}

// TestJSONCrossSite checks that a body a cross-site form can send (or
// one without a type) spends nothing: only application/json is decided.
func TestJSONCrossSite(t *testing.T) {
	h := envoyrls.JSONHandler(newService(t, false))
	const req = `{"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "203.0.113.9"}]}], "hitsAddend": 10}`
	for _, ctype := range []string{"", "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		if w := postAs(h, http.MethodPost, ctype, req); w.Code != http.StatusUnsupportedMediaType {
			t.Errorf("POST /json as %q = %d, want 415", ctype, w.Code)
		}
	}
	// The limit of 10 is whole: the refused requests took nothing.
	if w := postAs(h, http.MethodPost, "application/json; charset=utf-8", req); w.Code != http.StatusOK {
		t.Errorf("POST /json as JSON after the refused ones = %d %s, want 200", w.Code, w.Body)
	}
}

// TestJSON checks envoyproxy/ratelimit's /json endpoint: the request and
// the response in protobuf's JSON mapping, 200 until the limit and 429
// beyond it, the RateLimit fields as HTTP header fields.
func TestJSON(t *testing.T) {
	h := envoyrls.JSONHandler(newService(t, true))
	const req = `{"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "203.0.113.7"}]}], "hitsAddend": 2}`
	for i := range 6 {
		w := postJSON(h, http.MethodPost, req)
		want, wantCode := http.StatusOK, pb.RateLimitResponse_OK
		if i == 5 { // 10 per second, 2 a request
			want, wantCode = http.StatusTooManyRequests, pb.RateLimitResponse_OVER_LIMIT
		}
		var resp pb.RateLimitResponse
		if err := protojson.Unmarshal(w.Body.Bytes(), &resp); err != nil {
			t.Fatalf("request %d: body %q: %v", i, w.Body, err)
		}
		if w.Code != want || resp.GetOverallCode() != wantCode || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("request %d: %d %s %v, want %d and %v in JSON", i, w.Code, w.Header().Get("Content-Type"), &resp, want, wantCode)
		}
		if st := resp.GetStatuses()[0]; i < 5 && st.GetLimitRemaining() != uint32(8-2*i) {
			t.Errorf("request %d: limit_remaining %d, want %d", i, st.GetLimitRemaining(), 8-2*i)
		}
		if got := w.Header().Get("RateLimit-Policy"); got == "" {
			t.Errorf("request %d: no RateLimit-Policy field", i)
		}
		if got := w.Header().Get("Retry-After"); (i == 5) != (got != "") {
			t.Errorf("request %d: Retry-After %q", i, got)
		}
	}
}

// TestJSONBadRequests checks that /json refuses what is not a request of
// Envoy's API, with the status the caller can act on.
func TestJSONBadRequests(t *testing.T) {
	h := envoyrls.JSONHandler(newService(t, false))
	big := `{"domain": "edge", "descriptors": [` + strings.Repeat(`{"entries": [{"key": "a", "value": "b"}]},`, envoyrls.DefaultMaxMessageBytes/40) + `]}`
	for _, tc := range []struct {
		name, method, body string
		want               int
	}{
		{"get", http.MethodGet, "", http.StatusMethodNotAllowed},
		{"empty", http.MethodPost, "", http.StatusBadRequest},
		{"not json", http.MethodPost, "domain=edge", http.StatusBadRequest},
		{"unknown field", http.MethodPost, `{"domain": "edge", "descriptor": []}`, http.StatusBadRequest},
		{"no domain", http.MethodPost, `{"descriptors": [{"entries": [{"key": "a", "value": "b"}]}]}`, http.StatusBadRequest},
		{"empty descriptor", http.MethodPost, `{"domain": "edge", "descriptors": [{}]}`, http.StatusBadRequest},
		{"negative hits", http.MethodPost, `{"domain": "edge", "descriptors": [{"entries": [{"key": "a"}]}], "hitsAddend": -1}`, http.StatusBadRequest},
		{"too large", http.MethodPost, big, http.StatusRequestEntityTooLarge},
		{"unknown domain", http.MethodPost, `{"domain": "other", "descriptors": [{"entries": [{"key": "a", "value": "b"}]}]}`, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w := postJSON(h, tc.method, tc.body); w.Code != tc.want {
				t.Errorf("%s /json %.40q: %d %q, want %d", tc.method, tc.body, w.Code, w.Body, tc.want)
			}
		})
	}
}

// TestJSONStoreFailure checks that a store that cannot decide is 503, not
// an admission.
func TestJSONStoreFailure(t *testing.T) {
	h := envoyrls.JSONHandler(newServiceOn(t, false, failingStore{}))
	w := postJSON(h, http.MethodPost, `{"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "203.0.113.7"}]}]}`)
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("failing store: %d, want 503", w.Code)
	}
}

// FuzzJSON checks that no body makes /json panic or answer anything but
// a response of Envoy's API (200 or 429, the code matching the status)
// or a client error.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{
		`{"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "203.0.113.7"}]}]}`,
		`{"domain": "edge", "descriptors": [{"entries": [{"key": "odd", "value": "x"}]}], "hitsAddend": 4294967295}`,
		`{"domain": "edge", "descriptors": [{"entries": [{"key": "path", "value": "/login"}, {"key": "remote_address", "value": "\u0000\ud800"}]}]}`,
		`{"domain": "edge", "descriptors": [{"entries": [{"key": "user", "value": "u"}], "limit": {"requestsPerUnit": 0, "unit": "SECOND"}}]}`,
		`{"domain": "", "descriptors": []}`, `[]`, `null`, `{"domain": 1}`, `{} trailing`,
	} {
		f.Add(s)
	}
	h := envoyrls.JSONHandler(newService(f, false))
	f.Fuzz(func(t *testing.T, body string) {
		w := postJSON(h, http.MethodPost, body)
		switch w.Code {
		case http.StatusOK, http.StatusTooManyRequests:
			var resp pb.RateLimitResponse
			if err := protojson.Unmarshal(w.Body.Bytes(), &resp); err != nil || (w.Code == http.StatusOK) != (resp.GetOverallCode() == pb.RateLimitResponse_OK) {
				t.Fatalf("/json %q = %d %s, want a response whose code matches", body, w.Code, w.Body)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("/json %q = %d %s, want 200, 429, 400 or 413", body, w.Code, w.Body)
		}
	})
}
