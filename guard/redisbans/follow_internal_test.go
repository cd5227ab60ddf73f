package redisbans

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// TestFollowerSkipsMergedPuts: a process bans three addresses, then a
// fourth, for which its set merges them into a network ban; only then
// does its follower read the log. The puts of the three, logged before
// the merge deleted them, must not put them back beside the network ban
// (they took room, and a merge made meanwhile counted them again); the
// network ban and its collateral are what the merge made.
func TestFollowerSkipsMergedPuts(t *testing.T) {
	ctx := context.Background()
	r, c, before := mergedRegistry(t)
	entries, err := c.Do(ctx, c.B().Xrange().Key(r.keys[keyLog]).Start("("+r.last).End("+").Build()).AsXRangeSlices()
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		if _, err := r.apply([]rueidis.XRangeSlice{e}); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if got := r.set.List(time.Time{}); !slices.EqualFunc(got, before, sameBan) {
			t.Errorf("after entry %d of %d the set holds %+v, want %+v", i+1, len(entries), got, before)
		}
	}
	if len(r.merged) != 0 {
		t.Errorf("merged still holds %v after the merge's deletes", r.merged)
	}
}

// TestFollowerAppliesUncoveredPuts: a put of a field the set merged away
// is applied when nothing here enforces it any more (the network ban
// was lifted here, its lift not yet logged): skipping it would lose it.
func TestFollowerAppliesUncoveredPuts(t *testing.T) {
	ctx := context.Background()
	r, c, _ := mergedRegistry(t)
	r.set.Delete("abuse", "198.51.100.0/30")
	entries, err := c.Do(ctx, c.B().Xrange().Key(r.keys[keyLog]).Start("("+r.last).End("+").Build()).AsXRangeSlices()
	if err != nil || len(entries) == 0 {
		t.Fatalf("log: %d entries, %v", len(entries), err)
	}
	if _, err := r.apply(entries[:1]); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.set.Get("abuse", "198.51.100.1"); !ok {
		t.Errorf("the put of 198.51.100.1, which nothing here covers, was skipped")
	}
}

// mergedRegistry returns a registry whose follower is stopped, after it
// banned 198.51.100.1, .2, .3 and .5 in a set of room for three
// addresses, which merged the first three into 198.51.100.0/30; and its
// client, and the set's bans then.
func mergedRegistry(t *testing.T) (*Registry, rueidis.Client, []guard.Ban) {
	t.Helper()
	ctx := context.Background()
	s := testserver.StartRedis(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	now := time.Now()
	r, err := New(ctx, Config{Client: c, Prefix: "merged", Limits: guard.BanLimits{Max: 4, MaxKeys: 1}, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	r.cancel() // the follower stops: the test applies the log itself
	<-r.done
	for _, a := range []string{"198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.5"} {
		if _, err := r.Put(ctx, guard.Ban{Jail: "abuse", Key: a, Reason: "test", Since: now, Until: now.Add(time.Hour), Offences: 1}); err != nil {
			t.Fatalf("Put(%s): %v", a, err)
		}
	}
	before := r.set.List(time.Time{})
	if len(before) != 2 || before[0].Key != "198.51.100.0/30" || before[0].Collateral != 1 {
		t.Fatalf("after the fourth ban the set holds %+v, want the three merged into 198.51.100.0/30 and the fourth", before)
	}
	return r, c, before
}

// sameBan reports whether a and b are the same ban, read from Redis or
// not (a time read back has no monotonic reading).
func sameBan(a, b guard.Ban) bool {
	return a.Jail == b.Jail && a.Key == b.Key && a.Reason == b.Reason && a.Since.Equal(b.Since) && a.Until.Equal(b.Until) &&
		a.Offences == b.Offences && a.Collateral == b.Collateral
}
