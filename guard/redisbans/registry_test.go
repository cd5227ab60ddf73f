package redisbans_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/redisbans"
	sredis "github.com/sluicehq/sluice/store/redis"
)

// t0 starts every test's clock: a real date.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at returns a clock that always reads t.
func at(t time.Time) func() time.Time { return func() time.Time { return t } }

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
// lifts, and says when there was nothing to lift; lapsed bans are not
// listed.
func TestPutListDelete(t *testing.T) {
	ctx := context.Background()
	_, c := startRedis(t)
	r := newRegistry(t, c, redisbans.Config{Prefix: "test", Clock: at(t0)})
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
	if err := r.Delete(ctx, "login", "2001:DB8::/64"); err != nil { // read as the set reads it
		t.Fatal(err)
	}
	if err := r.Delete(ctx, "login", "never banned"); !errors.Is(err, guard.ErrNotBanned) {
		t.Errorf("Delete of an unknown ban = %v, want ErrNotBanned", err)
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

// TestExpiry: lapsed bans are dropped from the keys (in batches larger
// than one script call drops) by the caller's clock, even when it is far
// from the server's; no key of the registry ever has a TTL, so that no
// volatile-* eviction policy can take it.
func TestExpiry(t *testing.T) {
	ctx := context.Background()
	_, c := startRedis(t)
	r := newRegistry(t, c, redisbans.Config{Prefix: "exp", Clock: at(t0)})
	const n = 2500 // more than one prune batch
	var cmds rueidis.Commands
	for i := range n {
		// Bans written by an older process: straight into the keys, as
		// Put would, to keep the test fast.
		f := "5:login" + strconv.Itoa(i)
		cmds = append(cmds,
			c.B().Hset().Key("{exp}:bans").FieldValue().FieldValue(f, fmt.Sprintf(`{"reason":"r","since":%d,"until":%d,"offences":1}`, t0.UnixNano(), t0.Add(time.Minute).UnixNano())).Build(),
			c.B().Zadd().Key("{exp}:until").ScoreMember().ScoreMember(float64(t0.Add(time.Minute).UnixMilli()), f).Build())
	}
	for _, res := range c.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			t.Fatal(err)
		}
	}
	keep := ban("login", "198.51.100.1", t0, time.Hour, 1)
	if _, err := r.Put(ctx, keep); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(ctx, "login", "198.51.100.1"); err != nil { // a lift leaves a mark until the ban's end
		t.Fatal(err)
	}
	if _, err := r.Put(ctx, keep); err != nil { // and a ban replaces it
		t.Fatal(err)
	}
	if got, err := r.List(ctx, t0.Add(30*time.Second)); err != nil || len(got) != n+1 {
		t.Fatalf("List before the lapse = %d bans, %v; want %d", len(got), err, n+1)
	}
	got, err := r.List(ctx, t0.Add(2*time.Minute))
	if err != nil || !sameBans(got, []guard.Ban{keep}) {
		t.Fatalf("List after the lapse = %+v, %v; want only %+v", got, err, keep)
	}
	if n, err := do(t, c, "HLEN", "{exp}:bans").AsInt64(); err != nil || n != 1 {
		t.Errorf("HLEN = %d, %v; want 1 (lapsed bans dropped)", n, err)
	}
	if n, err := do(t, c, "HLEN", "{exp}:lifts").AsInt64(); err != nil || n != 0 {
		t.Errorf("HLEN of lifts = %d, %v; want 0 (the ban replaced the lift)", n, err)
	}
	for _, k := range []string{"{exp}:bans", "{exp}:until", "{exp}:version", "{exp}:log"} {
		if ttl, err := do(t, c, "PTTL", k).AsInt64(); err != nil || ttl != -1 {
			t.Errorf("PTTL %s = %v, %v; want -1, no TTL", k, ttl, err)
		}
	}
	if _, err := r.List(ctx, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n, err := do(t, c, "EXISTS", "{exp}:bans", "{exp}:until", "{exp}:lifts").AsInt64(); err != nil || n != 0 {
		t.Errorf("after every ban lapsed, %d of the ban keys are left, %v; want none", n, err)
	}
}

// TestPaging lists more bans than a page, each once, and loads them all
// in a new process.
func TestPaging(t *testing.T) {
	ctx := context.Background()
	_, c := startRedis(t)
	r := newRegistry(t, c, redisbans.Config{Prefix: "page", PageSize: 7, Clock: at(t0)})
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
	if got := newRegistry(t, c, redisbans.Config{Prefix: "page", PageSize: 7, Clock: at(t0)}).Bans().Stats().Bans; got != n {
		t.Errorf("a new registry loaded %d bans, want %d", got, n)
	}
}

// TestSkipsForeignRecords: a field, record or log entry that some other
// writer put under the registry's keys is skipped, by List, by a load
// and by the replicas, not an error.
func TestSkipsForeignRecords(t *testing.T) {
	ctx := context.Background()
	_, c := startRedis(t)
	r := newRegistry(t, c, redisbans.Config{Prefix: "foreign", Clock: at(t0)})
	good := ban("j", "k", t0, time.Hour, 1)
	if _, err := r.Put(ctx, good); err != nil {
		t.Fatal(err)
	}
	do(t, c, "HSET", "{foreign}:bans", "no length", "{}", "9:short", "{}", "1:xk", "not json", "1:jz", "{}")
	do(t, c, "HSET", "{foreign}:lifts", "1:jk", "not a time", "junk", "1")
	do(t, c, "XADD", "{foreign}:log", "*", "hello", "world")
	do(t, c, "XADD", "{foreign}:log", "*", "v", "not a number")
	got, err := r.List(ctx, t0)
	if err != nil || !sameBans(got, []guard.Ban{good}) {
		t.Errorf("List = %+v, %v; want only %+v", got, err, good)
	}
	other := newRegistry(t, c, redisbans.Config{Prefix: "foreign", Clock: at(t0)})
	if got := other.Bans().List(t0); !sameBans(got, []guard.Ban{good}) {
		t.Errorf("a new registry loaded %+v, want only %+v", got, good)
	}
	next := ban("j", "next", t0, time.Hour, 1)
	if _, err := r.Put(ctx, next); err != nil {
		t.Fatal(err)
	}
	if _, ok := eventually(5*time.Second, func() bool { _, ok := other.Bans().Match("j", "next", t0); return ok }); !ok {
		t.Error("after foreign log entries, a ban did not reach the other registry")
	}
}

// TestServerDown: with Redis gone, Put and Delete fail with an error
// wrapping ErrStore but take effect here at once; List and New fail.
func TestServerDown(t *testing.T) {
	s, c := startRedis(t)
	r := newRegistry(t, c, redisbans.Config{Prefix: "down", Clock: at(t0)})
	s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := r.Put(ctx, ban("j", "k", t0, time.Hour, 1))
	if !errors.Is(err, sluice.ErrStore) {
		t.Errorf("Put with the server down = %v, want ErrStore", err)
	}
	if _, ok := r.Bans().Match("j", "k", t0); !ok {
		t.Error("Put with the server down: the ban is not enforced here")
	}
	if err := r.Delete(ctx, "j", "k"); !errors.Is(err, sluice.ErrStore) {
		t.Errorf("Delete with the server down = %v, want ErrStore", err)
	}
	if _, ok := r.Bans().Match("j", "k", t0); ok {
		t.Error("Delete with the server down: the ban is still enforced here")
	}
	if _, err := r.List(ctx, t0); !errors.Is(err, sluice.ErrStore) {
		t.Errorf("List with the server down = %v, want ErrStore", err)
	}
	if got := r.Stats().Pending; got != 1 {
		t.Errorf("Stats().Pending = %d, want 1 (the lift, in place of the ban)", got)
	}
	if _, err := redisbans.New(ctx, redisbans.Config{Client: c, Prefix: "down"}); !errors.Is(err, sluice.ErrStore) {
		t.Errorf("New with the server down = %v, want ErrStore", err)
	}
	if _, err := redisbans.New(ctx, redisbans.Config{}); !errors.Is(err, sluice.ErrInvalidRequest) {
		t.Errorf("New without a client = %v, want ErrInvalidRequest", err)
	}
	if err := r.Close(); !errors.Is(err, sluice.ErrStore) {
		t.Errorf("Close with a change not written = %v, want ErrStore", err)
	}
}

// TestFleet runs two "processes" — each with its own Redis connections,
// Redis store and jail — sharing one Redis: a ban made by one is enforced
// and listed by the other, which lifts it for both.
func TestFleet(t *testing.T) {
	ctx := context.Background()
	s, _ := startRedis(t)
	var now atomic.Int64 // the followers read the clock too
	now.Store(t0.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	process := func() *guard.Jail {
		c := newClient(t, s.Addr)
		store, err := sredis.New(sredis.Config{Client: c})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		j, err := guard.NewJail(store, guard.JailConfig{Name: "login", MaxFailures: 3, BanTime: 10 * time.Minute, Jitter: -1,
			Registry: newRegistry(t, c, redisbans.Config{Prefix: "fleet", Clock: clock}), Namespace: "fleet-test", Clock: clock})
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
	// Each process enforces from its own replica: the ban reaches b
	// through the change log, within a bound.
	const bound = 2 * time.Second
	if d, ok := eventually(bound, func() bool { _, banned, err := b.Banned(ctx, ip); return err == nil && banned }); !ok {
		t.Errorf("process b: not banned %v after process a banned", d)
	}
	list, err := b.Bans(ctx)
	if err != nil || len(list) != 1 || list[0].Key != ip || list[0].Offences != 1 || list[0].Until.Sub(list[0].Since) != 10*time.Minute {
		t.Errorf("process b: Bans = %+v, %v; want a's 10-minute ban of %s", list, err, ip)
	}
	if err := b.Lift(ctx, ip); err != nil {
		t.Fatal(err)
	}
	if d, ok := eventually(bound, func() bool { _, banned, err := a.Banned(ctx, ip); return err == nil && !banned }); !ok {
		t.Errorf("process a: still banned %v after b lifted", d)
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
	if _, ok := eventually(bound, func() bool { _, banned, _ := a.Banned(ctx, ip); return banned }); !ok {
		t.Error("process a: b's second ban did not arrive")
	}
	now.Add(int64(21 * time.Minute)) // the second offence doubles the ban
	if list, err := a.Bans(ctx); err != nil || len(list) != 0 {
		t.Errorf("after the lapse: Bans = %+v, %v; want none", list, err)
	}
	for _, j := range []*guard.Jail{a, b} {
		if _, banned, _ := j.Banned(ctx, ip); banned {
			t.Errorf("after the lapse: %s still banned", ip)
		}
	}
}
