package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/testing/testclock"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/wire"
)

// TestBans bans a key through the admin API, over each transport: the
// service denies it until the ban ends, the client caches that denial,
// and lifting the ban lets the key through at once.
func TestBans(t *testing.T) {
	s := startService(t, testclock.New(t0))
	ctx := t.Context()
	for _, tr := range transports {
		c := newClient(t, s, tr, client.Config{})
		key := "banned-" + tr
		b, err := c.Ban(ctx, wire.BanRequest{Jail: server.ManualJail, Key: key, Duration: "1h", Reason: "test"})
		if err != nil || b.Key != key || !b.Until.Equal(t0.Add(time.Hour)) {
			t.Fatalf("%s: Ban = %+v, %v; want %s banned until %v", tr, b, err, key, t0.Add(time.Hour))
		}
		bans, err := c.Bans(ctx)
		if err != nil || !hasBan(bans, key) {
			t.Fatalf("%s: Bans() = %+v, %v; want the ban of %s", tr, bans, err, key)
		}
		for range 2 {
			if d, err := c.Check(ctx, "api", key); err != nil || d.Allowed || d.RetryAfter != time.Hour {
				t.Fatalf("%s: Check(api, %s) banned = %+v, %v; want denied for 1h", tr, key, d, err)
			}
		}
		if st := c.Stats(); st.CacheHits != 1 {
			t.Errorf("%s: Stats() = %+v; want the second check of the banned key from the cache", tr, st)
		}
		if err := c.Lift(ctx, server.ManualJail, key); err != nil {
			t.Fatalf("%s: Lift = %v", tr, err)
		}
		if d, err := c.Check(ctx, "api", key); err != nil || !d.Allowed {
			t.Errorf("%s: Check(api, %s) after Lift = %+v, %v; want allowed", tr, key, d, err)
		}
		if err := c.Lift(ctx, server.ManualJail, key); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("%s: Lift of no ban = %v, want client.ErrNotFound", tr, err)
		}
	}
}

func hasBan(bans []wire.Ban, key string) bool {
	for _, b := range bans {
		if b.Key == key {
			return true
		}
	}
	return false
}

// TestBanErrors checks the admin API's refusals: a wrong token, no such
// jail, missing fields, and no admin API configured.
func TestBanErrors(t *testing.T) {
	s := startService(t, nil)
	ctx := t.Context()
	wrong, err := client.New(client.Config{URL: s.URL, AdminURL: s.Admin, AdminToken: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	none, err := client.New(client.Config{URL: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	c := newClient(t, s, "http", client.Config{})
	tests := []struct {
		name string
		c    *client.Client
		req  wire.BanRequest
		want error
	}{
		{"wrong token", wrong, wire.BanRequest{Jail: "manual", Key: "k"}, client.ErrUnauthorized},
		{"no admin API", none, wire.BanRequest{Jail: "manual", Key: "k"}, client.ErrUnsupported},
		{"no such jail", c, wire.BanRequest{Jail: "nope", Key: "k"}, client.ErrNotFound},
		{"no key", c, wire.BanRequest{Jail: "manual"}, sluice.ErrInvalidRequest},
		{"bad duration", c, wire.BanRequest{Jail: "manual", Key: "k", Duration: "soon"}, sluice.ErrInvalidRequest},
	}
	for _, tt := range tests {
		if _, err := tt.c.Ban(ctx, tt.req); !errors.Is(err, tt.want) {
			t.Errorf("%s: Ban(%+v) = %v, want %v", tt.name, tt.req, err, tt.want)
		}
	}
	if _, err := wrong.Bans(ctx); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("Bans() with a wrong token = %v, want ErrUnauthorized", err)
	}
}
