package memcached

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/meta"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// flood writes n junk items shaped like the store's counters (same key
// length, so the same slab class) and reads each back once, as a botnet
// of n fresh actors would make a shared cache do. It stops at the first
// error reply and returns it (with -M, memcached refuses writes when
// full), after touching hot every 2000 items. Each round writes keys of
// its own.
func flood(t *testing.T, c *meta.Client, round, n, keyLen int, hot func()) error {
	t.Helper()
	var b meta.Batch
	const batch = 500
	for i := 0; i < n; i += batch {
		b.Reset()
		for j := i; j < i+batch; j++ {
			k := "junk:" + strconv.Itoa(round) + ":" + strconv.Itoa(j)
			k += strings.Repeat("x", max(keyLen-len(k), 0))
			b.Set(k, []byte("1"), time.Hour)
			b.Get(k)
		}
		if err := c.Do(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		for j := range b.Replies {
			if err := b.Replies[j].Err(); err != nil {
				return err
			}
		}
		if hot != nil && i%2000 == 0 {
			hot()
		}
	}
	return nil
}

// stat reads one counter of memcached's "stats".
func stat(t *testing.T, addr, name string) int64 {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(c, "stats\r\n")
	sc := bufio.NewScanner(c)
	for sc.Scan() && sc.Text() != "END" {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[1] == name {
			n, _ := strconv.ParseInt(f[2], 10, 64)
			return n
		}
	}
	t.Fatalf("stats: no %s", name)
	return 0
}

// TestEvictionPressure shows what a flood of fresh keys does to live
// counters in an 8 MB memcached that evicts (the default): an actor that
// used up its limit and then went quiet loses its counters and gets a
// fresh allowance, while an actor that keeps being asked stays limited,
// as memcached's LRU keeps recently used items. With -M memcached evicts
// nothing: the counters survive, and writes of new actors fail with an
// error wrapping sluice.ErrStore once memory is full, so the failure
// policy decides. See the package doc, "Eviction".
func TestEvictionPressure(t *testing.T) {
	l := sluice.Limit{Rate: 5, Period: time.Hour, Algorithm: sluice.FixedWindow}
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		args     []string
		idleLost bool
	}{
		{"evicting", []string{"-m", "8"}, true},
		{"-M", []string{"-m", "8", "-M"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testserver.StartMemcached(t, tc.args...)
			s := newStore(t, Config{Addrs: []string{srv.Addr}})
			prefix := uniquePrefix(t)
			req := func(key string, op sluice.Op) sluice.Request {
				return sluice.Request{Prefix: prefix, Key: key, Limits: []sluice.Limit{l}, Op: op, Cost: 1, Now: t0}
			}
			for _, key := range []string{"idle", "busy"} {
				for range l.Rate + 1 {
					if _, err := s.Decide(ctx, req(key, sluice.OpTake)); err != nil {
						t.Fatal(err)
					}
				}
			}
			busyErrs := 0
			hot := func() {
				if d, err := s.Decide(ctx, req("busy", sluice.OpTake)); err != nil {
					busyErrs++
				} else if d.Allowed {
					t.Errorf("busy actor allowed during the flood")
				}
			}
			idleBucket := bucketKey(limitBase(prefix+"idle", l.StateID()), 0, floorDiv(t0.UnixNano(), int64(l.Period)))
			raw := meta.New(meta.Config{Addr: srv.Addr})
			defer raw.Close()
			// idleGone looks for the idle actor's counter without marking
			// it as used.
			idleGone := func() bool {
				var b meta.Batch
				b.Exists(idleBucket)
				if err := raw.Do(ctx, &b); err != nil {
					t.Fatal(err)
				}
				return b.Replies[0].Status == meta.StatusMiss
			}
			// Flood in rounds of 300k items: memcached's LRU maintainer
			// moves the idle counter from the warm to the cold end in the
			// background, so how much flood evicts it depends on timing.
			var floodErr error
			rounds := 0
			for rounds < 4 && floodErr == nil && !idleGone() {
				floodErr = flood(t, raw, rounds, 300_000, len(idleBucket), hot)
				rounds++
			}
			evictions := stat(t, srv.Addr, "evictions")
			t.Logf("after %d rounds of 300k junk items: %d evictions, flood stopped by %v, %d errors on the busy actor", rounds, evictions, floodErr, busyErrs)

			idle, err := s.Decide(ctx, req("idle", sluice.OpPeek))
			if err != nil {
				t.Fatal(err)
			}
			if lost := idle.Allowed; lost != tc.idleLost {
				t.Errorf("idle actor at its limit: after the flood allowed = %v, want %v (state lost by eviction)", lost, tc.idleLost)
			}
			busy, err := s.Decide(ctx, req("busy", sluice.OpPeek))
			if err != nil || busy.Allowed {
				t.Errorf("busy actor after the flood: allowed %v, %v; want still denied", busy.Allowed, err)
			}
			if !tc.idleLost {
				if evictions != 0 {
					t.Errorf("-M: %d evictions, want 0", evictions)
				}
				if floodErr == nil {
					t.Fatalf("-M: 300k items fit in 8 MB: the test no longer fills memory")
				}
				_, err := s.Decide(ctx, req("newcomer", sluice.OpTake))
				if !errors.Is(err, sluice.ErrStore) {
					t.Errorf("-M, memory full: take of a new actor = %v, want an error wrapping ErrStore", err)
				}
			} else if evictions == 0 {
				t.Errorf("no evictions: the flood did not fill memory")
			}
		})
	}
}
