package forwardauth_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/testing/cputime"
	"github.com/sluicehq/sluice/server/forwardauth"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/store/memory"
)

// BenchmarkDecide is forward-auth's cost per check of a rule keyed by
// the client and the path, on the memory store, over 10,000 clients
// behind a trusted proxy, with guard lists that pass them
// (kind=forward-auth: Caller and Decide, what ServeHTTP does before it
// answers), beside its floor: the memory store's decision of the same
// key alone (kind=floor). CPU per check is the process's (cpu-ns/op).
func BenchmarkDecide(b *testing.B) {
	c, err := config.Parse("b.yaml", []byte(`rules:
  - name: api
    limits: ["1000/min"]
forward_auth:
  rule: api
  key: [ip, path]
  trusted_proxies: [10.0.0.0/8]
guard:
  allow: [192.0.2.0/24]
  deny: [198.51.100.0/24]
`))
	if err != nil {
		b.Fatal(err)
	}
	store := memory.New(memory.Config{})
	b.Cleanup(func() { store.Close() })
	var allow, deny guard.List
	for _, e := range c.Guard.Allow {
		allow.Add(e)
	}
	for _, e := range c.Guard.Deny {
		deny.Add(e)
	}
	e, err := rules.New(rules.Config{Store: store, Rules: c.Rules, Guard: guard.NewGuard(guard.GuardConfig{Allow: &allow, Deny: &deny})})
	if err != nil {
		b.Fatal(err)
	}
	h, err := forwardauth.New(c.ForwardAuth, e, nil, store, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]*http.Request, 10_000)
	keys := make([]string, len(reqs))
	for i := range reqs {
		r := httptest.NewRequest(http.MethodGet, "/auth", nil)
		r.RemoteAddr = "10.0.0.1:5000"
		client := fmt.Sprintf("172.16.%d.%d", i/256, i%256)
		r.Header.Set("X-Forwarded-For", client)
		r.Header.Set("X-Original-URI", "/v1/orders?page=2")
		reqs[i], keys[i] = r, client+"|/v1/orders"
	}
	ctx := context.Background()
	var res rules.Result
	kinds := []struct {
		name string
		do   func(i int) error
	}{
		{"forward-auth", func(i int) error { return h.Decide(ctx, h.Caller(reqs[i]), "api", &res) }},
		{"floor", func(i int) error {
			_, err := store.Decide(ctx, sluice.Request{Prefix: "sluice:api:", Key: keys[i], Limits: e.Rule("api").Limits, Cost: 1})
			return err
		}},
	}
	for _, k := range kinds {
		b.Run("kind="+k.name, func(b *testing.B) { cputime.Loop(b, len(reqs), k.do) })
	}
}
