package forwardauth

import (
	"net/http"
	"testing"
)

// TestHeadersCanonical checks that the names first looks up in the
// header map directly are canonical, as Header.Get would make them.
func TestHeadersCanonical(t *testing.T) {
	for _, names := range [][]string{uriHeaders, methodHeaders, hostHeaders} {
		for _, n := range names {
			if c := http.CanonicalHeaderKey(n); c != n {
				t.Errorf("CanonicalHeaderKey(%q) = %q, want %q", n, c, n)
			}
		}
	}
}
