package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/wire"
)

// FuzzCheck checks that no body makes the check endpoint panic or answer
// anything but a decision (200) or a client error with a JSON message.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"rule":"login","key":"k"}`,
		`{"rule":"api","key":"k","cost":20,"peek":true}`,
		`{"rule":"login","key":"k","cost":-1}`,
		`{"rule":"login","key":"\u0000\ud800","cost":1e3}`,
		`{"rule":"login","key":"k"} trailing`,
		`[]`, `null`, `{"rule":null,"key":null}`,
	} {
		f.Add(s)
	}
	s, _ := newTestServer(f)
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		switch w.Code {
		case http.StatusOK:
			var resp wire.CheckResponse
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp.Rule == "" {
				t.Fatalf("check %q = 200 %s, want a decision", body, w.Body)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			var e wire.ErrorResponse
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == "" {
				t.Fatalf("check %q = %d %s, want a JSON error", body, w.Code, w.Body)
			}
		default:
			t.Fatalf("check %q = %d %s, want 200, 400 or 413", body, w.Code, w.Body)
		}
	})
}
