package redisbans_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/redisbans"
	sredis "github.com/sluicehq/sluice/store/redis"
)

// t0 starts every test's clock: a real date.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newRegistry(t *testing.T, c redis.UniversalClient, prefix string, pageSize int) *redisbans.Registry {
	t.Helper()
	r, err := redisbans.New(redisbans.Config{Client: c, Prefix: prefix, PageSize: pageSize})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

func ban(jail, key string, since time.Time, d time.Duration, offences int) guard.Ban {
	return guard.Ban{Jail: jail, Key: key, Reason: "5 failed logins within 10m0s", Since: since, Until: since.Add(d), Offences: offences}
}

func sameBans(got, want []guard.Ban) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Jail != w.Jail || g.Key != w.Key || g.Reason != w.Reason || !g.Since.Equal(w.Since) || !g.Until.Equal(w.Until) || g.Offences != w.Offences {
			return false
		}
	}
	return true
}

// TestPutListDelete: bans come back exactly, sorted by jail and key,
// whatever bytes their jails and keys hold; a Put replaces; a Delete
// forgets; lapsed bans are not listed.
func TestPutListDelete(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t, startRedis(t), "test", 0)
	bans := []guard.Ban{
		ban("login", "203.0.113.7", t0, 10*time.Minute, 1),
		ban("login", "2001:db8::/64", t0, time.Hour, 3),
		ban("a:b", "c", t0, time.Hour, 1),             // a jail with the separator in it
		ban("a", ":bc", t0, time.Hour, 1),             // must not be confused with it
		ban("login", "\xff\x00k", t0, 2*time.Hour, 2), // any bytes
		ban("login", "short", t0, time.Minute, 1),
	}
	for _, b := range bans {
		if _, err := r.Put(ctx, b); err != nil {
			t.Fatalf("Put(%+v): %v", b, err)
		}
	}
	got, err := r.List(ctx, t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := []guard.Ban{bans[3], bans[2], bans[1], bans[0], bans[5], bans[4]}
	if !sameBans(got, want) {
		t.Errorf("List = %+v\nwant %+v", got, want)
	}
	// A second ban of the same key replaces the first.
	again := ban("login", "203.0.113.7", t0.Add(time.Minute), 40*time.Minute, 2)
	if _, err := r.Put(ctx, again); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(ctx, "login", "2001:db8::/64"); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(ctx, "login", "never banned"); err != nil {
		t.Errorf("Delete of an unknown ban = %v, want nil", err)
	}
	got, err = r.List(ctx, t0.Add(5*time.Minute)) // "short" has lapsed
	if err != nil {
		t.Fatal(err)
	}
	want = []guard.Ban{bans[3], bans[2], again, bans[4]}
	if !sameBans(got, want) {
		t.Errorf("List after replace, delete and lapse = %+v\nwant %+v", got, want)
	}
}

// TestExpiry: lapsed bans are dropped from both keys (in batches larger
// than one script call drops), and both keys expire with the last ban,
// by the caller's clock even when it is far from the server's.
func TestExpiry(t *testing.T) {
	ctx := context.Background()
	c := startRedis(t)
	r := newRegistry(t, c, "exp", 0)
	const n = 2500 // more than one prune batch
	pipe := c.Pipeline()
	for i := range n {
		// Bans written by an older process: straight into the keys, as
		// Put would, to keep the test fast.
		f := "5:login" + strconv.Itoa(i)
		pipe.HSet(ctx, "{exp}:bans", f, fmt.Sprintf(`{"reason":"r","since":%d,"until":%d,"offences":1}`, t0.UnixNano(), t0.Add(time.Minute).UnixNano()))
		pipe.ZAdd(ctx, "{exp}:until", redis.Z{Score: float64(t0.Add(time.Minute).UnixMilli()), Member: f})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	keep := ban("login", "198.51.100.1", t0, time.Hour, 1)
	if _, err := r.Put(ctx, keep); err != nil {
		t.Fatal(err)
	}
	if got, err := r.List(ctx, t0.Add(30*time.Second)); err != nil || len(got) != n+1 {
		t.Fatalf("List before the lapse = %d bans, %v; want %d", len(got), err, n+1)
	}
	got, err := r.List(ctx, t0.Add(2*time.Minute))
	if err != nil || !sameBans(got, []guard.Ban{keep}) {
		t.Fatalf("List after the lapse = %+v, %v; want only %+v", got, err, keep)
	}
	for _, k := range []string{"{exp}:bans", "{exp}:until"} {
		if n, err := c.HLen(ctx, "{exp}:bans").Result(); err != nil || n != 1 {
			t.Errorf("HLEN = %d, %v; want 1 (lapsed bans dropped)", n, err)
		}
		// t0 is months from the server's clock: the TTL is the ban's
		// time left by the caller's clock (an hour since t0, less the
		// Put's now t0), never an absolute time already past.
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil || ttl < 59*time.Minute || ttl > time.Hour {
			t.Errorf("PTTL %s = %v, %v; want about 1h", k, ttl, err)
		}
	}
}

// TestPaging lists more bans than a page, each once.
func TestPaging(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t, startRedis(t), "page", 7)
	const n = 300
	for i := range n {
		if _, err := r.Put(ctx, ban("j", fmt.Sprintf("10.0.%d.%d", i/256, i%256), t0, time.Hour, 1)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := r.List(ctx, t0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, b := range got {
		if seen[b.Key] {
			t.Errorf("ban of %s listed twice", b.Key)
		}
		seen[b.Key] = true
	}
	if len(got) != n {
		t.Errorf("List = %d bans, want %d", len(got), n)
	}
}

// TestSkipsForeignRecords: a field or record that some other writer put
// under the registry's keys is skipped, not an error.
func TestSkipsForeignRecords(t *testing.T) {
	ctx := context.Background()
	c := startRedis(t)
	r := newRegistry(t, c, "foreign", 0)
	good := ban("j", "k", t0, time.Hour, 1)
	if _, err := r.Put(ctx, good); err != nil {
		t.Fatal(err)
	}
	c.HSet(ctx, "{foreign}:bans", "no length", "{}", "9:short", "{}", "1:xk", "not json")
	got, err := r.List(ctx, t0)
	if err != nil || !sameBans(got, []guard.Ban{good}) {
		t.Errorf("List = %+v, %v; want only %+v", got, err, good)
	}
}

// TestServerDown: every call fails with an error wrapping ErrStore.
func TestServerDown(t *testing.T) {
	c := startRedis(t)
	r := newRegistry(t, c, "down", 0)
	if err := c.Shutdown(context.Background()).Err(); err != nil && !errors.Is(err, redis.ErrClosed) && err.Error() != "EOF" {
		t.Logf("SHUTDOWN: %v", err) // the connection drops as the server exits
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for name, err := range map[string]error{
		"Put":    func() error { _, err := r.Put(ctx, ban("j", "k", t0, time.Hour, 1)); return err }(),
		"Delete": r.Delete(ctx, "j", "k"),
		"List":   func() error { _, err := r.List(ctx, t0); return err }(),
	} {
		if !errors.Is(err, sluice.ErrStore) {
			t.Errorf("%s with the server down = %v, want ErrStore", name, err)
		}
	}
	if _, err := redisbans.New(redisbans.Config{}); !errors.Is(err, sluice.ErrInvalidRequest) {
		t.Errorf("New without a client = %v, want ErrInvalidRequest", err)
	}
}

// TestFleet runs two "processes" — each with its own Redis connections,
// Redis store and jail — sharing one Redis: a ban made by one is enforced
// and listed by the other, which lifts it for both.
func TestFleet(t *testing.T) {
	ctx := context.Background()
	addr := startRedis(t).Options().Addr
	now := t0
	clock := func() time.Time { return now }
	process := func() *guard.Jail {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		store, err := sredis.New(sredis.Config{GoRedis: c})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		j, err := guard.NewJail(store, guard.JailConfig{Name: "login", MaxFailures: 3, BanTime: 10 * time.Minute, Jitter: -1,
			Registry: newRegistry(t, c, "fleet", 0), Namespace: "fleet-test", Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	a, b := process(), process()
	const ip = "203.0.113.7"
	for i, j := range []*guard.Jail{a, b, a} { // failures from both processes count together
		_, banned, err := j.Fail(ctx, ip, "failed logins")
		if err != nil {
			t.Fatal(err)
		}
		if banned != (i == 2) {
			t.Errorf("failure %d: banned = %v, want %v", i+1, banned, i == 2)
		}
	}
	if _, banned, err := b.Banned(ctx, ip); err != nil || !banned {
		t.Errorf("process b: Banned = %v, %v; want the ban process a made", banned, err)
	}
	list, err := b.Bans(ctx)
	if err != nil || len(list) != 1 || list[0].Key != ip || list[0].Offences != 1 || list[0].Until.Sub(list[0].Since) != 10*time.Minute {
		t.Errorf("process b: Bans = %+v, %v; want a's 10-minute ban of %s", list, err, ip)
	}
	if err := b.Lift(ctx, ip); err != nil {
		t.Fatal(err)
	}
	if _, banned, err := a.Banned(ctx, ip); err != nil || banned {
		t.Errorf("process a after b lifted: Banned = %v, %v; want false", banned, err)
	}
	if list, err := a.Bans(ctx); err != nil || len(list) != 0 {
		t.Errorf("process a after b lifted: Bans = %+v, %v; want none", list, err)
	}
	// A ban lapses for both, and leaves the list.
	for range 3 {
		if _, _, err := b.Fail(ctx, ip, "failed logins"); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(21 * time.Minute) // the second offence doubles the ban
	if list, err := a.Bans(ctx); err != nil || len(list) != 0 {
		t.Errorf("after the lapse: Bans = %+v, %v; want none", list, err)
	}
	if _, banned, _ := a.Banned(ctx, ip); banned {
		t.Error("after the lapse: still banned")
	}
}
