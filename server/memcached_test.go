package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// TestMemcachedFleetBans bans on one server of a fleet sharing memcached:
// every server refuses the address (within the registry's poll) and
// lists the ban, any can lift it, and a server started afterwards
// enforces the bans in force at once.
func TestMemcachedFleetBans(t *testing.T) {
	m := testserver.StartMemcached(t)
	c, err := config.Parse("memcached.yaml", []byte("store: {type: memcached, memcached: {addrs: [\""+m.Addr+"\"]}}\n"+
		"rules: [{name: web, limits: [\"100000/min\"]}]\nadmin: {token: "+adminToken+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("fleet%d", time.Now().UnixNano())
	start := func() *Service {
		s, err := NewService(context.Background(), c, Options{Namespace: ns, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	fleet := []*Service{start(), start()}
	const ip = "203.0.113.9"
	if _, err := fleet[0].admin.Ban(t.Context(), ManualJail, banEntry(ip), time.Hour, "test"); err != nil {
		t.Fatal(err)
	}
	within := func(want int, h http.Handler) int { // the registry polls every second
		var code int
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if code = auth(t, h, "", ip).Code; code == want {
				break
			}
		}
		return code
	}
	late := start()
	if code := auth(t, late.Handler(), "", ip).Code; code != http.StatusForbidden {
		t.Errorf("a server started after the ban: %d, want 403 at once", code)
	}
	for i, s := range append(fleet, late) {
		if code := within(http.StatusForbidden, s.Handler()); code != http.StatusForbidden {
			t.Errorf("server %d: banned address = %d, want 403", i, code)
		}
		bans, err := s.admin.Bans(t.Context())
		if err != nil || len(bans) != 1 || bans[0].Key != ip || bans[0].Reason != "test" {
			t.Errorf("server %d: Bans() = %+v, %v; want the ban made on server 0", i, bans, err)
		}
	}
	if err := fleet[1].admin.Lift(t.Context(), ManualJail, banEntry(ip)); err != nil {
		t.Fatal(err)
	}
	for i, s := range fleet {
		if code := within(http.StatusOK, s.Handler()); code != http.StatusOK {
			t.Errorf("server %d: lifted address = %d, want 200", i, code)
		}
		if bans, _ := s.admin.Bans(t.Context()); len(bans) != 0 {
			t.Errorf("server %d: Bans() after lift = %+v, want none", i, bans)
		}
	}
}
