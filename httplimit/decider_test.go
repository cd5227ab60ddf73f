package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testing/testclock"
)

// plainDecider is a Decider that is no Reserver: a Limiter seen only
// through the Decider methods, as a remote rule is.
type plainDecider struct{ lim *sluice.Limiter }

func (p plainDecider) Allow(ctx context.Context, key string) (sluice.Decision, error) {
	return p.lim.Allow(ctx, key)
}
func (p plainDecider) Reset(ctx context.Context, key string) error { return p.lim.Reset(ctx, key) }
func (p plainDecider) Limits() []sluice.Limit                      { return p.lim.Limits() }

// TestDeciderRules checks what New accepts of a rule's Decider: one of
// Limiter and Decider, and Count only with a Reserver.
func TestDeciderRules(t *testing.T) {
	lim := limiter(t, newStore(t), testclock.New(testclock.T0), "a", "2/min")
	tests := []struct {
		name string
		rule httplimit.Rule
		ok   bool
	}{
		{"limiter", httplimit.Rule{Limiter: lim}, true},
		{"decider", httplimit.Rule{Decider: plainDecider{lim}}, true},
		{"limiter as decider, counting", httplimit.Rule{Decider: lim, Count: httplimit.Status(401)}, true},
		{"both", httplimit.Rule{Limiter: lim, Decider: plainDecider{lim}}, false},
		{"neither", httplimit.Rule{}, false},
		{"decider counting", httplimit.Rule{Decider: plainDecider{lim}, Count: httplimit.Status(401)}, false},
	}
	for _, tt := range tests {
		_, err := httplimit.New(httplimit.Config{Rules: []httplimit.Rule{tt.rule}})
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, sluice.ErrInvalidRequest) {
			t.Errorf("%s: New error = %v, want ok %v (else sluice.ErrInvalidRequest)", tt.name, err, tt.ok)
		}
	}
}

// TestDeciderTakes runs a Decider that is no Reserver beside a Limiter:
// it limits as a Limiter does, and when the other rule denies
// a request, its take stays counted (it cannot be given back), where the
// Limiter's is refunded.
func TestDeciderTakes(t *testing.T) {
	clk := testclock.New(testclock.T0)
	store := newStore(t)
	remote := limiter(t, store, clk, "remote", "3/min")
	local := limiter(t, store, clk, "local", "1/min")
	m := middleware(t, httplimit.Config{Rules: []httplimit.Rule{
		{Name: "remote", Decider: plainDecider{remote}},
		{Name: "local", Limiter: local},
	}})
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	send := func() int {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "203.0.113.7:40000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for i, want := range []int{200, 429, 429} {
		if got := send(); got != want {
			t.Fatalf("request %d = %d, want %d", i+1, got, want)
		}
	}
	ctx := t.Context()
	if d, _ := remote.Peek(ctx, "203.0.113.7"); d.Allowed {
		t.Errorf("remote after 3 requests, 2 denied by local: %+v; want its 3 takes kept", d)
	}
}
