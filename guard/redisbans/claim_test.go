package redisbans_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/redisbans"
	"github.com/sluicehq/sluice/store/memory"
)

// TestClaimExpiryOncePerFleet: three processes share the bans; each
// sees a ban lapse, and one of them only tells of it.
func TestClaimExpiryOncePerFleet(t *testing.T) {
	s, _ := startRedis(t)
	ctx := context.Background()
	now := time.Now()
	told := 0
	var regs []*redisbans.Registry
	var watchers []*guard.ExpiryWatcher
	for range 3 {
		r := newRegistry(t, newClient(t, s.Addr), redisbans.Config{})
		regs = append(regs, r)
		watchers = append(watchers, guard.NewExpiryWatcher(guard.ExpiryConfig{Registry: r, OnExpire: func(guard.Ban) { told++ }}))
	}
	for i, key := range []string{"203.0.113.7", "user:alice"} {
		if _, err := regs[i].Put(ctx, guard.Ban{Jail: "login", Key: key, Since: now, Until: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range regs {
		if _, ok := eventually(5*time.Second, func() bool { return r.Bans().Stats().Bans == 2 }); !ok {
			t.Fatalf("a replica holds %d bans, want 2", r.Bans().Stats().Bans)
		}
	}
	var others int64
	for _, w := range watchers {
		others += w.Sweep(ctx, now.Add(2*time.Hour)).Others
	}
	if told != 2 || others != 4 {
		t.Errorf("3 processes told %d lapses, %d were others'; want 2 told, 4 others'", told, others)
	}
}

// TestJailTellsBanWhileRedisDown: a ban this process enforces though
// Redis failed is told all the same (the audit trail must have it).
func TestJailTellsBanWhileRedisDown(t *testing.T) {
	s, c := startRedis(t)
	reg := newRegistry(t, c, redisbans.Config{})
	store := memory.New(memory.Config{})
	defer store.Close()
	var told []guard.Ban
	j, err := guard.NewJail(store, guard.JailConfig{Name: "login", Registry: reg, OnBan: func(b guard.Ban) { told = append(told, b) }})
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	b, err := j.Ban(ctx, "203.0.113.7", time.Hour, "by hand")
	if !errors.Is(err, sluice.ErrStore) {
		t.Fatalf("Ban with Redis down = %v, want ErrStore", err)
	}
	if len(told) != 1 || told[0] != b {
		t.Errorf("OnBan got %+v, want once the ban enforced here, %+v", told, b)
	}
}
