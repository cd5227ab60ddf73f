package redis

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// TestFullRedis fills a Redis with no eviction to its maxmemory, frees
// a little room, and sends batches of takes on new keys until they no
// longer fit: a take reported allowed was counted, and a take that failed
// (a store error, not a denial) was not. Redis refuses a script's first
// write past maxmemory and lets a script that has written finish, so a
// batch decided in one pass (one_pass), whose writes come last, is
// written whole or not at all.
func TestFullRedis(t *testing.T) {
	srv := testserver.StartRedis(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	s := newStore(t, Config{Addrs: []string{srv.Addr}})
	big := strings.Repeat("x", 32<<10)
	for i := 0; ; i++ {
		if _, err := srv.Do("SET", fmt.Sprint("fill:", i), big); err != nil {
			if !strings.Contains(err.Error(), "OOM") {
				t.Fatal(err)
			}
			break
		}
		if i == 1000 {
			t.Fatal("4mb of maxmemory never filled")
		}
	}
	if _, err := srv.Do("DEL", "fill:0", "fill:1", "fill:2", "fill:3"); err != nil { // room for about half the takes below
		t.Fatal(err)
	}
	prefix := uniquePrefix(t)
	limits := []sluice.Limit{{Rate: 5, Period: time.Hour}}
	var allowed, failed int
	for b := range 40 {
		rs := make([]sluice.Request, 64)
		for i := range rs {
			rs[i] = sluice.Request{Prefix: prefix, Key: fmt.Sprint(b, "-", i/2), Limits: limits, Cost: 1, Now: t0}
		}
		ds, errs := s.DecideBatch(t.Context(), rs)
		for i := 0; i < len(rs); i += 2 {
			peek := rs[i]
			peek.Op = sluice.OpPeek
			p, err := s.Decide(t.Context(), peek)
			if err != nil {
				t.Fatalf("peek of %s: %v", rs[i].Key, err)
			}
			for j := i; j < i+2; j++ {
				switch {
				case errs[j] != nil && !errors.Is(errs[j], sluice.ErrStore):
					t.Errorf("take %d of %s: error %v, want a store error", j-i+1, rs[j].Key, errs[j])
				case errs[j] != nil && p.Remaining != 4: // a peek of 1 on an empty key
					t.Errorf("take %d of %s failed (%v), but the key holds %d taken", j-i+1, rs[j].Key, errs[j], 4-p.Remaining)
				case errs[j] == nil && (!ds[j].Allowed || p.Remaining != 2):
					t.Errorf("take %d of %s = %+v, and the key holds %d taken; want allowed, 2 taken", j-i+1, rs[j].Key, ds[j], 4-p.Remaining)
				case errs[j] == nil:
					allowed++
				default:
					failed++
				}
			}
		}
	}
	if allowed == 0 || failed == 0 {
		t.Errorf("%d takes allowed, %d failed: want some of each (a store that fills up between the batches)", allowed, failed)
	}
	t.Logf("%d takes allowed, %d failed", allowed, failed)
}
