package memcachedbans_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/memcachedbans"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// TestClaimExpiryOncePerFleet: three processes share the bans; each
// sees a ban lapse, and one of them only tells of it.
func TestClaimExpiryOncePerFleet(t *testing.T) {
	s := testserver.StartMemcached(t)
	ctx := context.Background()
	now := time.Now()
	told := 0
	regs := fleet(t, 3, memcachedbans.Config{Addrs: []string{s.Addr}})
	var watchers []*guard.ExpiryWatcher
	for _, r := range regs {
		watchers = append(watchers, guard.NewExpiryWatcher(guard.ExpiryConfig{Registry: r, OnExpire: func(guard.Ban) { told++ }}))
	}
	for i, key := range []string{"203.0.113.7", "user:alice"} {
		if _, err := regs[i].Put(ctx, guard.Ban{Jail: "login", Key: key, Since: now, Until: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range regs {
		if _, ok := eventually(bound, func() bool { return r.Bans().Stats().Bans == 2 }); !ok {
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
