package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/testing/testclock"
)

// t0 starts every test clock.
var t0 = testclock.T0

// do sends a request to h and returns the recorded answer.
func do(t *testing.T, h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// banEntry reads key as the admin API reads the key of a ban: an
// address, a network or "key:NAME", else a bare key.
func banEntry(key string) guard.Entry {
	if e, err := guard.ParseEntry(key); err == nil {
		return e
	}
	return guard.KeyEntry(key)
}
