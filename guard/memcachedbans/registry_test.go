package memcachedbans_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/memcachedbans"
	"github.com/sluicehq/sluice/internal/meta"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// bound is how long a change may take to reach another process in these
// tests, which poll every pollEvery.
const (
	pollEvery = 20 * time.Millisecond
	bound     = 5 * time.Second
)

func newRegistry(t testing.TB, conf memcachedbans.Config) *memcachedbans.Registry {
	t.Helper()
	if conf.PollEvery == 0 {
		conf.PollEvery = pollEvery
	}
	r, err := memcachedbans.New(context.Background(), conf)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func fleet(t testing.TB, n int, conf memcachedbans.Config) []*memcachedbans.Registry {
	out := make([]*memcachedbans.Registry, n)
	for i := range out {
		out[i] = newRegistry(t, conf)
	}
	return out
}

func ban(key string, since time.Time, d time.Duration) guard.Ban {
	return guard.Ban{Jail: "j", Key: key, Reason: "5 failed logins", Since: since, Until: since.Add(d), Offences: 1}
}

func matched(r *memcachedbans.Registry, key string) bool {
	_, ok := r.Bans().Match("j", key, time.Now())
	return ok
}

// eventually polls cond until it holds or d has passed.
func eventually(d time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			return time.Since(start), false
		}
		time.Sleep(time.Millisecond) // a poll with a deadline
	}
	return time.Since(start), true
}

// TestPutListDelete: bans come back exactly from List, in any process,
// whatever bytes their keys hold; a lift is gone from the list, and a
// lift of nothing says so.
func TestPutListDelete(t *testing.T) {
	ctx := context.Background()
	s := testserver.StartMemcached(t)
	p := fleet(t, 2, memcachedbans.Config{Addrs: []string{s.Addr}, Prefix: "list"})
	now := time.Now().Truncate(time.Millisecond)
	keys := []string{"203.0.113.7", "2001:db8::/64", "\xff\x00\r\n k", "a:b", strings.Repeat("x", 200)}
	for _, k := range keys {
		if _, err := p[0].Put(ctx, ban(k, now, time.Hour)); err != nil {
			t.Fatalf("Put(%q): %v", k, err)
		}
	}
	if err := p[1].Delete(ctx, "j", "2001:DB8::/64"); err != nil { // from the other process, before it polled
		t.Fatalf("Delete: %v", err)
	}
	if err := p[1].Delete(ctx, "j", "never"); !errors.Is(err, guard.ErrNotBanned) {
		t.Errorf("Delete of nothing = %v, want ErrNotBanned", err)
	}
	for i, r := range p {
		list, err := r.List(ctx, now)
		if err != nil || len(list) != len(keys)-1 {
			t.Fatalf("process %d: List = %d bans, %v; want %d", i, len(list), err, len(keys)-1)
		}
		for j, b := range list {
			want := ban(b.Key, now, time.Hour)
			if b.Reason != want.Reason || !b.Since.Equal(want.Since) || !b.Until.Equal(want.Until) || b.Key == "2001:db8::/64" ||
				j > 0 && list[j-1].Key >= b.Key {
				t.Errorf("process %d: List[%d] = %+v", i, j, b)
			}
		}
	}
}

// TestReplicas: a ban made in one process is enforced in the other within
// the bound, a network ban covers every address in it in both, and a
// lift made in the other reaches the first the same way.
func TestReplicas(t *testing.T) {
	ctx := context.Background()
	s1, s2 := testserver.StartMemcached(t), testserver.StartMemcached(t)
	p := fleet(t, 2, memcachedbans.Config{Addrs: []string{s1.Addr, s2.Addr}, Prefix: "rep"})
	now := time.Now()
	for _, tt := range []struct {
		key     string
		covered []string
	}{
		{"203.0.113.7", []string{"203.0.113.7", "::ffff:203.0.113.7"}},
		{"198.51.100.0/24", []string{"198.51.100.1", "::ffff:198.51.100.254"}},
		{"2001:db8:1::/48", []string{"2001:db8:1:2::1"}},
		{"\x00any\xffbytes", []string{"\x00any\xffbytes"}},
	} {
		if _, err := p[0].Put(ctx, ban(tt.key, now, time.Hour)); err != nil {
			t.Fatal(err)
		}
		for _, k := range tt.covered {
			if !matched(p[0], k) {
				t.Errorf("%q: not enforced at once by its own process for %q", tt.key, k)
			}
			if d, ok := eventually(bound, func() bool { return matched(p[1], k) }); !ok {
				t.Errorf("%q: not enforced by the other process for %q after %v", tt.key, k, d)
			}
		}
		if err := p[1].Delete(ctx, "j", tt.key); err != nil {
			t.Fatal(err)
		}
		if d, ok := eventually(bound, func() bool { return !matched(p[0], tt.key) }); !ok {
			t.Errorf("lift of %q: still enforced by the first process after %v", tt.key, d)
		}
	}
}

// TestRestart: a new process enforces every ban in force once New
// returns, and no lifted one.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	s := testserver.StartMemcached(t)
	conf := memcachedbans.Config{Addrs: []string{s.Addr}, Prefix: "restart"}
	r, err := memcachedbans.New(ctx, conf)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, k := range []string{"203.0.113.7", "198.51.100.0/24", "alice", "lifted"} {
		if _, err := r.Put(ctx, ban(k, now, time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Delete(ctx, "j", "lifted"); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = newRegistry(t, conf)
	for _, k := range []string{"203.0.113.7", "198.51.100.9", "alice"} {
		if !matched(r, k) {
			t.Errorf("after a restart, %q is not banned", k)
		}
	}
	if matched(r, "lifted") {
		t.Error("after a restart, a lifted ban is back")
	}
}

// TestServerRestart kills memcached while processes ban and lift, and
// starts it again empty: every ban stays enforced where it was made, and
// once memcached answers, the pages come back from the replicas, the
// changes made meanwhile included, the lift too.
func TestServerRestart(t *testing.T) {
	ctx := context.Background()
	s := testserver.StartMemcached(t)
	conf := memcachedbans.Config{Addrs: []string{s.Addr}, Prefix: "crash"}
	p := fleet(t, 2, conf)
	now := time.Now()
	for _, k := range []string{"before", "lift-me"} {
		if _, err := p[0].Put(ctx, ban(k, now, time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, ok := eventually(bound, func() bool { return matched(p[1], k) }); !ok {
			t.Fatalf("%s did not reach the other process", k)
		}
	}
	s.Stop()
	for i, k := range []string{"down-0", "down-1"} {
		if _, err := p[i].Put(ctx, ban(k, now, time.Hour)); !errors.Is(err, sluice.ErrStore) {
			t.Errorf("Put with memcached down = %v, want ErrStore", err)
		}
		if !matched(p[i], k) {
			t.Errorf("%s: not enforced by its process while memcached is down", k)
		}
	}
	if err := p[1].Delete(ctx, "j", "lift-me"); !errors.Is(err, sluice.ErrStore) {
		t.Errorf("Delete with memcached down = %v, want ErrStore", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"before", "down-0", "down-1"} {
		if d, ok := eventually(bound, func() bool { return matched(p[0], k) && matched(p[1], k) }); !ok {
			t.Errorf("%s: not enforced by both processes %v after memcached came back", k, d)
		}
	}
	if d, ok := eventually(bound, func() bool { return !matched(p[0], "lift-me") && !matched(p[1], "lift-me") }); !ok {
		t.Errorf("the lift made while memcached was down did not reach the other process after %v", d)
	}
	fresh := newRegistry(t, conf) // loads what memcached holds now
	for _, k := range []string{"before", "down-0", "down-1"} {
		if !matched(fresh, k) {
			t.Errorf("%s: not in memcached after it came back", k)
		}
	}
	if matched(fresh, "lift-me") || p[0].Stats().Restored+p[1].Stats().Restored == 0 {
		t.Errorf("lift-me in memcached %v, pages restored %d, %d; want lifted, some restored",
			matched(fresh, "lift-me"), p[0].Stats().Restored, p[1].Stats().Restored)
	}
}

// TestEviction floods a memcached of 2 MB with junk while two processes
// hold bans: the pages evicted are written back, every ban stays
// enforced in both, and a process started after the flood loads them
// all.
func TestEviction(t *testing.T) {
	ctx := context.Background()
	s := testserver.StartMemcached(t, "-m", "2")
	conf := memcachedbans.Config{Addrs: []string{s.Addr}, Prefix: "evict", Pages: 16}
	p := fleet(t, 2, conf)
	now := time.Now()
	var keys []string
	for i := range 300 {
		keys = append(keys, fmt.Sprintf("10.1.%d.%d", i/200, i%200))
		if _, err := p[i%2].Put(ctx, ban(keys[i], now, time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	c := meta.New(meta.Config{Addr: s.Addr})
	defer c.Close()
	var b meta.Batch
	for round := range 10 { // about 10 MB of junk: five times the memory
		b.Reset()
		for i := range 1000 {
			b.Set("junk:"+strconv.Itoa(round)+":"+strconv.Itoa(i), make([]byte, 1000), time.Hour)
		}
		if err := c.Do(ctx, &b); err != nil {
			t.Fatal(err)
		}
		b.Reset()
		for i := range 16 { // and evict some pages for sure
			b.Delete("evict:page:" + strconv.Itoa((round+i)%16))
		}
		if err := c.Do(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
	p = append(p, newRegistry(t, conf))
	for i, r := range p {
		if d, ok := eventually(bound, func() bool {
			fresh, err := memcachedbans.New(ctx, conf)
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Close()
			for _, k := range keys {
				if !matched(r, k) || !matched(fresh, k) {
					return false
				}
			}
			return true
		}); !ok {
			t.Errorf("process %d: not every ban enforced, here and by a new process, %v after the flood", i, d)
		}
	}
	if p[0].Stats().Restored+p[1].Stats().Restored == 0 {
		t.Error("no page was restored")
	}
}

// TestFlood bans 20,000 rotating addresses, as a jail under attack does
// (an address already covered is not banned again), from two processes
// that hold 512 bans each: both stay within capacity, and every banned
// address is banned in both and in a process started afterwards.
func TestFlood(t *testing.T) {
	const n, max = 20_000, 512
	ctx := context.Background()
	s := testserver.StartMemcached(t)
	// 10/8 holds the flood: coarsening may go up to it.
	conf := memcachedbans.Config{Addrs: []string{s.Addr}, Prefix: "flood", Limits: guard.BanLimits{Max: max, CoarsenIPv4: 8}}
	p := fleet(t, 2, conf)
	now := time.Now()
	addrs := make([]string, n)
	puts := 0
	for i := range addrs {
		addrs[i] = fmt.Sprintf("10.%d.%d.%d", i%64, (i/64)%256, 1+i/(64*256))
		if matched(p[i%2], addrs[i]) {
			continue
		}
		puts++
		if _, err := p[i%2].Put(ctx, ban(addrs[i], now, time.Hour)); err != nil {
			t.Fatalf("Put #%d (%s): %v", i, addrs[i], err)
		}
		if st := p[i%2].Bans().Stats(); st.Bans > max {
			t.Fatalf("after %d bans, a process holds %d, more than %d", i+1, st.Bans, max)
		}
	}
	t.Logf("%d addresses, %d banned (the others covered already), coarsened %d and %d", n, puts, p[0].Bans().Stats().Coarsened, p[1].Bans().Stats().Coarsened)
	p = append(p, newRegistry(t, conf))
	for i, r := range p {
		d, ok := eventually(bound, func() bool {
			for _, a := range addrs {
				if !matched(r, a) {
					return false
				}
			}
			return true
		})
		t.Logf("process %d: every banned address banned after %v", i, d)
		if !ok {
			t.Errorf("process %d: not every banned address is banned after %v", i, d)
		}
		if st := r.Bans().Stats(); st.Bans > max || st.Refused != 0 {
			t.Errorf("process %d: %+v, want at most %d bans and none refused", i, st, max)
		}
	}
}

// TestRaces bans and lifts one key from two processes at once: both end
// up enforcing the same, the latest change.
func TestRaces(t *testing.T) {
	ctx := context.Background()
	s := testserver.StartMemcached(t)
	p := fleet(t, 2, memcachedbans.Config{Addrs: []string{s.Addr}, Prefix: "race"})
	now := time.Now()
	var wg sync.WaitGroup
	for i, r := range p {
		wg.Go(func() {
			for n := range 100 {
				if n%3 == 2 {
					_ = r.Delete(ctx, "j", "k")
					continue
				}
				if _, err := r.Put(ctx, ban("k", now, time.Duration(i*1000+n+1)*time.Second)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if d, ok := eventually(bound, func() bool {
		a, aok := p[0].Bans().Get("j", "k")
		b, bok := p[1].Bans().Get("j", "k")
		return aok == bok && a.Until.Equal(b.Until)
	}); !ok {
		a, aok := p[0].Bans().Get("j", "k")
		b, bok := p[1].Bans().Get("j", "k")
		t.Errorf("after %v: processes hold %v %v and %v %v", d, aok, a.Until, bok, b.Until)
	}
}

// TestForeignPage: a page item that something else wrote is overwritten
// with what the processes know, not an error; New refuses a prefix
// memcached cannot key.
func TestForeignPage(t *testing.T) {
	ctx := context.Background()
	s := testserver.StartMemcached(t)
	conf := memcachedbans.Config{Addrs: []string{s.Addr}, Prefix: "foreign", Pages: 1}
	r := newRegistry(t, conf)
	if _, err := r.Put(ctx, ban("k", time.Now(), time.Hour)); err != nil {
		t.Fatal(err)
	}
	c := meta.New(meta.Config{Addr: s.Addr})
	defer c.Close()
	var b meta.Batch
	b.Set("foreign:page:0", []byte("not a page"), time.Hour)
	if err := c.Do(ctx, &b); err != nil {
		t.Fatal(err)
	}
	if list, err := r.List(ctx, time.Now()); err != nil || len(list) != 1 {
		t.Errorf("List over a foreign page = %v, %v; want the ban", list, err)
	}
	if !matched(newRegistry(t, conf), "k") {
		t.Error("the ban was not written over the foreign page")
	}
	for _, bad := range []memcachedbans.Config{{}, {Addrs: []string{s.Addr}, Prefix: "has space"}} {
		if _, err := memcachedbans.New(ctx, bad); !errors.Is(err, sluice.ErrInvalidRequest) {
			t.Errorf("New(%+v) = %v, want ErrInvalidRequest", bad, err)
		}
	}
}

// TestServerDown: with memcached gone, Put and Delete fail with an error
// wrapping ErrStore but take effect here at once; List fails; Close says
// what it could not write.
func TestServerDown(t *testing.T) {
	ctx := context.Background()
	s := testserver.StartMemcached(t)
	r, err := memcachedbans.New(ctx, memcachedbans.Config{Addrs: []string{s.Addr}, Prefix: "down"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Put(ctx, ban("lift-me", time.Now(), time.Hour)); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if _, err := r.Put(ctx, ban("k", time.Now(), time.Hour)); !errors.Is(err, sluice.ErrStore) || !matched(r, "k") {
		t.Errorf("Put with memcached down = %v, enforced %v; want ErrStore, enforced", err, matched(r, "k"))
	}
	if err := r.Delete(ctx, "j", "lift-me"); !errors.Is(err, sluice.ErrStore) || matched(r, "lift-me") {
		t.Errorf("Delete with memcached down = %v, enforced %v; want ErrStore, lifted", err, matched(r, "lift-me"))
	}
	if _, err := r.List(ctx, time.Now()); !errors.Is(err, sluice.ErrStore) {
		t.Errorf("List with memcached down = %v, want ErrStore", err)
	}
	if st := r.Stats(); st.Pending == 0 {
		t.Errorf("Stats() = %+v, want pages pending", st)
	}
	if err := r.Close(); !errors.Is(err, sluice.ErrStore) {
		t.Errorf("Close with changes not written = %v, want ErrStore", err)
	}
}
