package redisbans_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/redisbans"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// bound is how long a change may take to reach another process in these
// tests: far above what it takes (about a millisecond, see
// BenchmarkPropagation), for slow CI machines.
const bound = 5 * time.Second

// fleet returns n registries of one prefix, each a process with its own
// client of the Redis at addr.
func fleet(t *testing.T, addr string, n int, conf redisbans.Config) []*redisbans.Registry {
	t.Helper()
	out := make([]*redisbans.Registry, n)
	for i := range out {
		out[i] = newRegistry(t, newClient(t, addr), conf)
	}
	return out
}

// matched reports whether r enforces a ban of jail covering key.
func matched(r *redisbans.Registry, jail, key string) bool {
	_, ok := r.Bans().Match(jail, key, time.Now())
	return ok
}

// TestReplicas: a ban made in one process is enforced in the other
// within the bound, for every kind of key — an address, networks of
// either family, IPv4-mapped forms, any bytes, a huge key — and a
// network ban covers every address in it, in both; a lift made in the
// other reaches the first the same way.
func TestReplicas(t *testing.T) {
	ctx := context.Background()
	s, _ := startRedis(t)
	p := fleet(t, s.Addr, 2, redisbans.Config{Prefix: "rep"})
	now := time.Now()
	long := strings.Repeat("\x00k", 1000)
	for _, tt := range []struct {
		key     string
		covered []string // keys the ban covers, itself included
		outside []string // keys it does not
	}{
		{"203.0.113.7", []string{"203.0.113.7", "::ffff:203.0.113.7", "203.0.113.7/32"}, []string{"203.0.113.8"}},
		{"198.51.100.0/24", []string{"198.51.100.1", "198.51.100.254", "::ffff:198.51.100.9", "198.51.100.128/25"}, []string{"198.51.101.1", "198.51.0.0/16"}},
		{"2001:db8:1::/48", []string{"2001:db8:1:2::1", "2001:db8:1:ffff::/64"}, []string{"2001:db8:2::1"}},
		{"::ffff:192.0.2.0/120", []string{"192.0.2.77", "::ffff:192.0.2.1"}, []string{"192.0.3.1"}},
		{"\xff\x00user\r\n:", []string{"\xff\x00user\r\n:"}, []string{"\xff\x00user"}},
		{long, []string{long}, []string{long[1:]}},
	} {
		if _, err := p[0].Put(ctx, ban("login", tt.key, now, time.Hour, 1)); err != nil {
			t.Fatalf("Put(%.20q): %v", tt.key, err)
		}
		for _, k := range tt.covered {
			if !matched(p[0], "login", k) {
				t.Errorf("ban of %.20q: not enforced at once in its own process for %.20q", tt.key, k)
			}
			if d, ok := eventually(bound, func() bool { return matched(p[1], "login", k) }); !ok {
				t.Errorf("ban of %.20q: not enforced in the other process for %.20q after %v", tt.key, k, d)
			}
		}
		for _, k := range tt.outside {
			if matched(p[0], "login", k) || matched(p[1], "login", k) {
				t.Errorf("ban of %.20q covers %.20q", tt.key, k)
			}
		}
		if err := p[1].Delete(ctx, "login", tt.key); err != nil {
			t.Fatalf("Delete(%.20q) in the other process: %v", tt.key, err)
		}
		if matched(p[1], "login", tt.key) {
			t.Errorf("lift of %.20q: not at once in its own process", tt.key)
		}
		if d, ok := eventually(bound, func() bool { return !matched(p[0], "login", tt.key) }); !ok {
			t.Errorf("lift of %.20q: the first process still enforces the ban after %v", tt.key, d)
		}
	}
}

// TestRestart: a new process on the same Redis and prefix enforces every
// ban in force as soon as New returns, and none that was lifted.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	_, c := startRedis(t)
	conf := redisbans.Config{Client: c, Prefix: "restart"}
	r, err := redisbans.New(ctx, conf)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	keys := []string{"203.0.113.7", "198.51.100.0/24", "2001:db8::/32", "alice", "\xff\x00", "lifted"}
	for _, k := range keys {
		if _, err := r.Put(ctx, ban("login", k, now, time.Hour, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Delete(ctx, "login", "lifted"); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r = newRegistry(t, c, conf)
	for _, k := range []string{"203.0.113.7", "198.51.100.77", "2001:db8:ffff::1", "alice", "\xff\x00"} {
		if !matched(r, "login", k) {
			t.Errorf("after a restart, %q is not banned", k)
		}
	}
	if matched(r, "login", "lifted") {
		t.Error("after a restart, a lifted ban is back")
	}
}

// TestRedisRestart kills Redis while processes ban and lift, and starts
// it again empty (no persistence): every ban stays enforced where it was
// made, the changes made meanwhile reach Redis and the other process
// once it answers, the bans Redis lost are written back, and a lift made
// meanwhile is not undone by them.
func TestRedisRestart(t *testing.T) {
	ctx := context.Background()
	s, _ := startRedis(t)
	p := fleet(t, s.Addr, 2, redisbans.Config{Prefix: "crash", CheckEvery: 100 * time.Millisecond})
	now := time.Now()
	for _, k := range []string{"before", "lift-me"} {
		if _, err := p[0].Put(ctx, ban("j", k, now, time.Hour, 1)); err != nil {
			t.Fatal(err)
		}
		if _, ok := eventually(bound, func() bool { return matched(p[1], "j", k) }); !ok {
			t.Fatalf("%s did not reach the other process", k)
		}
	}
	s.Stop()
	for i, k := range []string{"down-0", "down-1"} {
		if _, err := p[i].Put(ctx, ban("j", k, now, time.Hour, 1)); !errors.Is(err, sluice.ErrStore) {
			t.Errorf("Put with Redis down = %v, want ErrStore", err)
		}
		if !matched(p[i], "j", k) {
			t.Errorf("%s: not enforced by the process that made it while Redis is down", k)
		}
	}
	if err := p[1].Delete(ctx, "j", "lift-me"); !errors.Is(err, sluice.ErrStore) {
		t.Errorf("Delete with Redis down = %v, want ErrStore", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	fresh := newClient(t, s.Addr)
	inRedis := func(k string) bool {
		n, err := fresh.Do(ctx, fresh.B().Hexists().Key("{crash}:bans").Field("1:j"+k).Build()).AsInt64()
		return err == nil && n == 1
	}
	for _, k := range []string{"before", "down-0", "down-1"} {
		if d, ok := eventually(bound, func() bool { return inRedis(k) && matched(p[0], "j", k) && matched(p[1], "j", k) }); !ok {
			t.Errorf("%s: after Redis restarted, in Redis %v, enforced %v and %v after %v; want everywhere",
				k, inRedis(k), matched(p[0], "j", k), matched(p[1], "j", k), d)
		}
	}
	if d, ok := eventually(bound, func() bool {
		return !inRedis("lift-me") && !matched(p[0], "j", "lift-me") && !matched(p[1], "j", "lift-me")
	}); !ok {
		t.Errorf("the lift made while Redis was down was undone: in Redis %v, enforced %v and %v after %v",
			inRedis("lift-me"), matched(p[0], "j", "lift-me"), matched(p[1], "j", "lift-me"), d)
	}
	for i, r := range p {
		if d, ok := eventually(bound, func() bool { return r.Stats().Pending == 0 }); !ok {
			t.Errorf("process %d: %+v after %v, want nothing pending", i, r.Stats(), d)
		}
	}
}

// TestResyncAfterGap: a replica that finds a change missing from the
// log (trimmed away before it read it) reloads every ban, and so
// enforces the change it never read.
func TestResyncAfterGap(t *testing.T) {
	ctx := context.Background()
	s, c := startRedis(t)
	p := fleet(t, s.Addr, 2, redisbans.Config{Prefix: "gap"})
	now := time.Now()
	if _, err := p[0].Put(ctx, ban("j", "first", now, time.Hour, 1)); err != nil {
		t.Fatal(err)
	}
	if _, ok := eventually(bound, func() bool { return matched(p[1], "j", "first") }); !ok {
		t.Fatal("first ban did not reach the other process")
	}
	before := p[1].Stats().Resyncs
	// A change whose entry the log lost: in the hash, counted in the
	// version, gone from the stream.
	rec := fmt.Sprintf(`{"reason":"r","since":%d,"until":%d,"offences":1}`, now.UnixNano(), now.Add(time.Hour).UnixNano())
	do(t, c, "HSET", "{gap}:bans", "1:jhidden", rec)
	do(t, c, "ZADD", "{gap}:until", fmt.Sprint(now.Add(time.Hour).UnixMilli()), "1:jhidden")
	do(t, c, "INCR", "{gap}:version")
	do(t, c, "XTRIM", "{gap}:log", "MAXLEN", "0")
	if _, err := p[0].Put(ctx, ban("j", "after", now, time.Hour, 1)); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"hidden", "after"} {
		for i, r := range p {
			if d, ok := eventually(bound, func() bool { return matched(r, "j", k) }); !ok {
				t.Errorf("process %d: %s not enforced after %v", i, k, d)
			}
		}
	}
	if got := p[1].Stats().Resyncs; got <= before {
		t.Errorf("Resyncs = %d, want more than %d", got, before)
	}
}

// TestFlood bans 20,000 rotating addresses, as a jail under attack
// does (an address already covered is not banned again), into processes
// that hold 512 bans: both stay within their capacity, so does Redis,
// and every banned address is still banned in both processes and in a
// process started afterwards.
func TestFlood(t *testing.T) {
	t.Parallel() // mostly waits: on servers that start, on a failover, on round trips
	const n, max = 20_000, 512
	ctx := context.Background()
	s, c := startRedis(t)
	// 10/8 holds the flood: coarsening may go up to it.
	conf := redisbans.Config{Prefix: "flood", Limits: guard.BanLimits{Max: max, CoarsenIPv4: 8}}
	p := fleet(t, s.Addr, 2, conf)
	now := time.Now()
	addrs := make([]string, n)
	puts := 0
	start := time.Now()
	for i := range addrs {
		// 64 /16s of 10/8, rotating through their /24s.
		addrs[i] = fmt.Sprintf("10.%d.%d.%d", i%64, (i/64)%256, 1+i/(64*256))
		if matched(p[i%2], "abuse", addrs[i]) {
			continue
		}
		puts++
		if _, err := p[i%2].Put(ctx, ban("abuse", addrs[i], now, time.Hour, 1)); err != nil {
			t.Fatalf("Put #%d (%s): %v", i, addrs[i], err)
		}
		if st := p[i%2].Bans().Stats(); st.Bans > max {
			t.Fatalf("after %d bans, a process holds %d, more than %d", i+1, st.Bans, max)
		}
	}
	t.Logf("%d addresses in %v, %d banned (the others covered already), coarsened %d and %d",
		n, time.Since(start), puts, p[0].Bans().Stats().Coarsened, p[1].Bans().Stats().Coarsened)
	all := func(r *redisbans.Registry) bool {
		for _, a := range addrs {
			if !matched(r, "abuse", a) {
				return false
			}
		}
		return true
	}
	p = append(p, newRegistry(t, c, conf)) // a process started after the flood
	for i, r := range p {
		if d, ok := eventually(bound, func() bool { return all(r) }); !ok {
			t.Errorf("process %d: not every banned address is banned after %v", i, d)
		}
		if st := r.Bans().Stats(); st.Bans > max || st.Refused != 0 {
			t.Errorf("process %d: %+v, want at most %d bans and none refused", i, st, max)
		}
	}
	if n, err := do(t, c, "HLEN", "{flood}:bans").AsInt64(); err != nil || n > max {
		t.Errorf("Redis holds %d bans, %v; want at most %d", n, err, max)
	}
}

// TestRaces bans and lifts one key from two processes at once: whatever
// the order, both end up enforcing what Redis holds, the write that
// reached Redis last.
func TestRaces(t *testing.T) {
	ctx := context.Background()
	s, c := startRedis(t)
	p := fleet(t, s.Addr, 2, redisbans.Config{Prefix: "race"})
	now := time.Now()
	var wg sync.WaitGroup
	for i, r := range p {
		wg.Go(func() {
			for n := range 200 {
				if n%3 == 2 {
					_ = r.Delete(ctx, "j", "k") // ErrNotBanned when the other lifted first
					continue
				}
				if _, err := r.Put(ctx, ban("j", "k", now, time.Duration(i*1000+n+1)*time.Second, n)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	// inRedis returns the end of the ban Redis holds, if any.
	inRedis := func() (int64, bool) {
		v, err := c.Do(ctx, c.B().Hget().Key("{race}:bans").Field("1:jk").Build()).ToString()
		var rec struct{ Until int64 }
		if err != nil || json.Unmarshal([]byte(v), &rec) != nil {
			return 0, false
		}
		return rec.Until, true
	}
	agree := func() bool {
		until, banned := inRedis()
		for _, r := range p {
			if got, ok := r.Bans().Get("j", "k"); ok != banned || ok && got.Until.UnixNano() != until {
				return false
			}
		}
		return true
	}
	if d, ok := eventually(bound, agree); !ok {
		until, banned := inRedis()
		a, aok := p[0].Bans().Get("j", "k")
		b, bok := p[1].Bans().Get("j", "k")
		t.Errorf("after %v: Redis %v until %d; processes %v %d and %v %d", d, banned, until, aok, a.Until.UnixNano(), bok, b.Until.UnixNano())
	}
}

// TestCluster runs two processes on a Redis Cluster: the registry's keys
// share a slot, and bans and lifts reach the other process.
func TestCluster(t *testing.T) {
	t.Parallel() // mostly waits: on servers that start, on a failover, on round trips
	testserver.SkipShort(t, "a cluster takes seconds to start")
	ctx := context.Background()
	nodes := testserver.StartRedisCluster(t, 3)
	var p []*redisbans.Registry
	for range 2 {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{nodes[0].Addr}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		p = append(p, newRegistry(t, c, redisbans.Config{Prefix: "cluster"}))
	}
	if _, err := p[0].Put(ctx, ban("j", "198.51.100.0/24", time.Now(), time.Hour, 1)); err != nil {
		t.Fatal(err)
	}
	if _, ok := eventually(bound, func() bool { return matched(p[1], "j", "198.51.100.7") }); !ok {
		t.Error("a ban did not reach the other process")
	}
	if err := p[1].Delete(ctx, "j", "198.51.100.0/24"); err != nil {
		t.Fatal(err)
	}
	if _, ok := eventually(bound, func() bool { return !matched(p[0], "j", "198.51.100.7") }); !ok {
		t.Error("a lift did not reach the other process")
	}
	if list, err := p[0].List(ctx, time.Now()); err != nil || len(list) != 0 {
		t.Errorf("List = %v, %v; want none", list, err)
	}
}

// TestSentinel fails the master over while two processes hold bans on
// Sentinel clients: they keep every ban, and after the failover a ban
// and a lift reach the other process through the new master.
func TestSentinel(t *testing.T) {
	t.Parallel() // mostly waits: on servers that start, on a failover, on round trips
	testserver.SkipShort(t, "a failover takes seconds")
	ctx := context.Background()
	rs := testserver.StartRedisSentinel(t)
	var p []*redisbans.Registry
	for range 2 {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{rs.Sentinel.Addr},
			Sentinel: rueidis.SentinelOption{MasterSet: rs.MasterName}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		p = append(p, newRegistry(t, c, redisbans.Config{Prefix: "sentinel", CheckEvery: 100 * time.Millisecond}))
	}
	now := time.Now()
	if _, err := p[0].Put(ctx, ban("j", "before", now, time.Hour, 1)); err != nil {
		t.Fatal(err)
	}
	if err := rs.Failover(); err != nil {
		t.Fatal(err)
	}
	promoted := func() bool {
		role, err := rs.Replica.Do("ROLE")
		return err == nil && strings.HasPrefix(role, "master")
	}
	if d, ok := eventually(20*time.Second, func() bool {
		addr, err := rs.MasterAddr()
		return err == nil && addr == rs.Replica.Addr && promoted()
	}); !ok {
		t.Fatalf("the replica was not promoted %v after the failover began", d)
	}
	if d, ok := eventually(20*time.Second, func() bool {
		_, err := p[0].Put(ctx, ban("j", "after", now, time.Hour, 1))
		n, _ := rs.Replica.Do("HEXISTS", "{sentinel}:bans", "1:jafter")
		return err == nil && n == "1"
	}); !ok {
		t.Fatalf("no Put on the new master %v after the failover", d)
	}
	for _, k := range []string{"before", "after"} {
		if d, ok := eventually(bound, func() bool { return matched(p[0], "j", k) && matched(p[1], "j", k) }); !ok {
			t.Errorf("%s: not enforced by both processes %v after the failover", k, d)
		}
	}
	if err := p[1].Delete(ctx, "j", "before"); err != nil {
		t.Fatal(err)
	}
	if _, ok := eventually(bound, func() bool { return !matched(p[0], "j", "before") }); !ok {
		t.Error("a lift after the failover did not reach the other process")
	}
}

// TestNetworkAbsorbsAtCapacity: a process at its capacity learns of a
// network ban made elsewhere that covers more bans than one write deletes
// (mergeChunk); it merges them into the network ban, which Redis must
// then hold: it once deleted the network ban too, in the last chunk, as
// merged into itself, and every process dropped it (a lost ban).
func TestNetworkAbsorbsAtCapacity(t *testing.T) {
	ctx := context.Background()
	s, c := startRedis(t)
	const members = 1001 // more than mergeChunk
	full := newRegistry(t, newClient(t, s.Addr), redisbans.Config{Prefix: "absorb", Limits: guard.BanLimits{Max: 2 * (members + 1), MaxKeys: members + 1}})
	other := newRegistry(t, newClient(t, s.Addr), redisbans.Config{Prefix: "absorb"})
	now := time.Now()
	for i := range members {
		if _, err := full.Put(ctx, ban("j", fmt.Sprintf("10.9.%d.%d", i/250, 1+i%250), now, time.Hour, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := full.Put(ctx, ban("j", "192.0.2.1", now, time.Hour, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Put(ctx, ban("j", "10.9.0.0/16", now, time.Hour, 1)); err != nil {
		t.Fatal(err)
	}
	// The merge is done when Redis holds no ban within the network.
	hlen := func() int64 {
		n, err := c.Do(ctx, c.B().Hlen().Key("{absorb}:bans").Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if d, ok := eventually(bound, func() bool { return hlen() <= 2 }); !ok {
		t.Fatalf("after %v Redis holds %d bans, want the merge done (2)", d, hlen())
	}
	late := newRegistry(t, newClient(t, s.Addr), redisbans.Config{Prefix: "absorb"})
	for i, r := range []*redisbans.Registry{full, other, late} {
		if _, ok := eventually(bound, func() bool { return matched(r, "j", "10.9.200.7") && matched(r, "j", "192.0.2.1") }); !ok {
			t.Errorf("process %d: the network ban is not in force after the merge: %+v", i, r.Bans().Stats())
		}
	}
	if n := hlen(); n != 2 {
		t.Errorf("Redis holds %d bans, want the network's and 192.0.2.1's", n)
	}
}
