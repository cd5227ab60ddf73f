package memcachedbans

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/banfield"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// TestNetworkAbsorbsAtCapacity: a process at its capacity learns of a
// network ban made elsewhere that covers bans it holds, and merges them
// into it. What it writes must keep the network ban and lift the bans
// within it; it once also lifted the network ban itself, as merged into
// itself, and every other process then dropped it (a lost ban).
func TestNetworkAbsorbsAtCapacity(t *testing.T) {
	ctx := context.Background()
	s := testserver.StartMemcached(t)
	open := func(addresses int) *Registry {
		r, err := New(ctx, Config{Addrs: []string{s.Addr}, Prefix: "absorb", Limits: guard.BanLimits{Max: 2 * addresses, MaxKeys: addresses}, PollEvery: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	full, other := open(4), open(100)
	now := time.Now()
	ban := func(key string) guard.Ban {
		return guard.Ban{Jail: "j", Key: key, Reason: "r", Since: now, Until: now.Add(time.Hour), Offences: 1}
	}
	for _, k := range []string{"10.9.0.1", "10.9.0.2", "10.9.0.3", "192.0.2.1"} {
		if _, err := full.Put(ctx, ban(k)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.Put(ctx, ban("10.9.0.0/16")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for full.Bans().Stats().Coarsened == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the full process did not merge its bans into the network: %+v", full.Bans().Stats())
		}
		time.Sleep(time.Millisecond) // a poll with a deadline
	}
	full.mu.Lock()
	defer full.mu.Unlock()
	f := banfield.Name("j", "10.9.0.0/16")
	if e := full.pages[pageOf(f, len(full.keys))][f]; e.lifted {
		t.Errorf("the network ban is written lifted (into %q): every other process would drop it", e.into)
	}
	for _, k := range []string{"10.9.0.1", "10.9.0.2", "10.9.0.3"} {
		f := banfield.Name("j", k)
		if e := full.pages[pageOf(f, len(full.keys))][f]; !e.lifted || e.into != "10.9.0.0/16" {
			t.Errorf("%s is written %+v, want lifted into the network", k, e)
		}
	}
}
