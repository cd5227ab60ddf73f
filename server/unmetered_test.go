package server

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/wire"
)

// TestUnmetered checks that Options.Unmetered changes what is counted,
// not what is decided: the same checks get the same answers, the
// unmetered service counts no store decisions, and both count the
// guard's verdicts.
func TestUnmetered(t *testing.T) {
	const cfg = "rules:\n  - name: api\n    limits: [\"2/min\"]\nguard:\n  deny: [198.51.100.0/24]\n"
	checks := []string{
		`{"rule":"api","key":"203.0.113.7"}`, `{"rule":"api","key":"203.0.113.7"}`, `{"rule":"api","key":"203.0.113.7"}`,
		`{"rule":"api","key":"198.51.100.9"}`,
	}
	metered := newServiceWith(t, cfg, Options{})
	unmetered := newServiceWith(t, cfg, Options{Unmetered: true})
	for i, body := range checks {
		a := do(t, metered.Handler(), http.MethodPost, "/v1/check", body)
		b := do(t, unmetered.Handler(), http.MethodPost, "/v1/check", body)
		if a.Code != b.Code || !reflect.DeepEqual(decided(t, a.Body.Bytes()), decided(t, b.Body.Bytes())) {
			t.Errorf("check %d %s: metered %d %s, unmetered %d %s", i, body, a.Code, a.Body, b.Code, b.Body)
		}
	}
	for _, tc := range []struct {
		s       *Service
		name    string
		counted bool
	}{{metered, "metered", true}, {unmetered, "unmetered", false}} {
		m := do(t, tc.s.Handler(), http.MethodGet, "/metrics", "").Body.String()
		denied := `sluice_decisions_total{op="take",result="denied",rule="api"} 1`
		if strings.Contains(m, denied) != tc.counted {
			t.Errorf("%s: /metrics has %q: %v, want %v:\n%s", tc.name, denied, !tc.counted, tc.counted, grepLines(m, "sluice_decisions_total"))
		}
		guarded := `sluice_guard_total{action="deny-list",rule="api"} 1`
		if !strings.Contains(m, guarded) {
			t.Errorf("%s: /metrics lacks %q:\n%s", tc.name, guarded, grepLines(m, "sluice_guard_total"))
		}
	}
}

// decided is what a check's answer decided, without its times, which
// follow the wall clock.
func decided(t *testing.T, body []byte) wire.CheckResponse {
	t.Helper()
	var cr wire.CheckResponse
	if err := json.Unmarshal(body, &cr); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	cr.ResetAfter, cr.RetryAfter = 0, min(cr.RetryAfter, 1)
	return cr
}
