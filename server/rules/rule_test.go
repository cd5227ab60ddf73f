package rules

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestSetHeaders checks that SetHeaders sets what Header.Set sets.
func TestSetHeaders(t *testing.T) {
	e, _, _ := newEngine(t, checkIntoRules)
	ru := e.Rule("api")
	for _, d := range []sluice.Decision{
		{Allowed: true, Limit: ru.Limits[0], Remaining: 1, ResetAfter: 30 * time.Second},
		{Limit: ru.Limits[0], ResetAfter: 30 * time.Second, RetryAfter: 1500 * time.Millisecond},
	} {
		got := http.Header{"Retry-After": {"9"}, "X-Other": {"kept"}}
		ru.SetHeaders(got, d)
		want := http.Header{"Retry-After": {"9"}, "X-Other": {"kept"}}
		rl, ra := ru.Fields(d)
		want.Set("RateLimit-Policy", ru.Policy())
		want.Set("RateLimit", rl)
		if ra != "" {
			want.Set("Retry-After", ra)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("SetHeaders(%+v) = %v, want %v", d, got, want)
		}
	}
}
