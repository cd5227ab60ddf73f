package redis

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// TestBatchScriptCalls counts, with INFO commandstats, the script calls
// of a batch on one server, on both clients: one per run of up to 64
// takes and peeks under GCRA limits and fixed windows, whatever their
// keys, and one for each other request.
func TestBatchScriptCalls(t *testing.T) {
	srv := sharedServer(t)
	gcra := []sluice.Limit{{Rate: 5, Period: time.Hour}, {Rate: 9, Period: time.Minute}}
	mixed := []sluice.Limit{gcra[0], {Rate: 9, Period: time.Hour, Algorithm: sluice.SlidingLog}}
	fixed := []sluice.Limit{gcra[0], {Rate: 9, Period: time.Hour, Algorithm: sluice.FixedWindow}}
	for _, tc := range bothClients {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, tc.c(t))
			prefix := uniquePrefix(t)
			req := func(i int, kind byte) sluice.Request {
				r := sluice.Request{Prefix: prefix, Key: strconv.Itoa(i % 40), Limits: gcra, Cost: 1, Now: t0}
				switch kind {
				case 'p':
					r.Op = sluice.OpPeek
				case 'x': // invalid: over the burst
					r.Cost = 10
				case 'r':
					r.Op = sluice.OpReset
				case 'm':
					r.Limits = mixed
				case 'f':
					r.Limits = fixed
				}
				return r
			}
			s.DecideBatch(t.Context(), []sluice.Request{req(0, 'x')}) // no call
			s.DecideBatch(t.Context(), []sluice.Request{req(0, 'p')}) // loads the script
			for _, c := range []struct {
				kinds string // t take, p peek, x invalid, r reset, m take of a mixed policy, f of GCRA and a fixed window; * repeats the last
				calls int
			}{
				{"t", 1}, {"tp", 1}, {"t*16", 1}, {"xxt*13", 1}, {"t*64", 1}, {"t*65", 2}, {"t*200", 4}, {"x*5", 0},
				{"ttrtt", 3}, {"rrr", 3}, {"m*4", 4}, {"ttmttmt", 5}, {"tmt", 3}, {"tftfp", 1}, {"fmf", 3},
			} {
				var rs []sluice.Request
				for i := 0; i < len(c.kinds); i++ {
					if c.kinds[i] == '*' {
						n, _ := strconv.Atoi(c.kinds[i+1:])
						for range n - 1 {
							rs = append(rs, req(len(rs), c.kinds[i-1]))
						}
						break
					}
					rs = append(rs, req(len(rs), c.kinds[i]))
				}
				before := testserver.RedisCalls(srv.Addr, "evalsha")
				_, errs := s.DecideBatch(t.Context(), rs)
				if got := testserver.RedisCalls(srv.Addr, "evalsha") - before; got != int64(c.calls) {
					t.Errorf("DecideBatch(%s): %d EVALSHA, want %d", c.kinds, got, c.calls)
				}
				for i, err := range errs {
					if (rs[i].Cost == 10) != (err != nil) {
						t.Errorf("DecideBatch(%s)[%d] error = %v", c.kinds, i, err)
					}
				}
			}
		})
	}
}

// TestBatchErrors checks that requests of one batch are independent: one
// over a key of another type or holding a value the script did not write
// fails alone, with the error Decide gives, and the others are decided
// and written.
func TestBatchErrors(t *testing.T) {
	srv := sharedServer(t)
	s := newStore(t, Config{})
	prefix := uniquePrefix(t)
	limits := []sluice.Limit{{Rate: 2, Period: time.Hour}}
	badKeys(t, srv, prefix, limits[0])
	req := func(key string, op sluice.Op) sluice.Request {
		return sluice.Request{Prefix: prefix, Key: key, Limits: limits, Op: op, Cost: 1, Now: t0, At: t0}
	}
	checkBatch(t, s, []sluice.Request{
		req("a", sluice.OpTake), req("list", sluice.OpTake), req("a", sluice.OpTake),
		req("text", sluice.OpPeek), req("a", sluice.OpTake), req("text", sluice.OpReset), req("text", sluice.OpTake),
	}, []batchWant{{nil, true, 1}, {sluice.ErrStore, false, 0}, {nil, true, 0}, {sluice.ErrCorruptState, false, 0}, {nil, false, 0}, {nil, true, 1}, {nil, true, 1}})
	// Takes and peeks alone, which the script decides in one pass
	// (one_pass), get the same errors: the list, which MGET reads as
	// empty, sends the batch down the per-request path.
	for _, withList := range []bool{false, true} {
		b := uniquePrefix(t)
		badKeys(t, srv, b, limits[0])
		keys := []string{"a", "text", "a", "text", "a"}
		// take a, peek text/list, take a, peek text, take a
		want := []batchWant{{nil, true, 1}, {sluice.ErrCorruptState, false, 0}, {nil, true, 0}, {sluice.ErrCorruptState, false, 0}, {nil, false, 0}}
		if withList {
			keys[1], want[1].err = "list", sluice.ErrStore
		}
		rs := make([]sluice.Request, len(keys))
		for i, k := range keys {
			rs[i] = sluice.Request{Prefix: b, Key: k, Limits: limits, Op: sluice.Op(i % 2), Cost: 1, Now: t0}
		}
		checkBatch(t, s, rs, want)
	}
}

// badKeys stores, under prefix and l, a list at key "list" and a value
// the script did not write at key "text".
func badKeys(t *testing.T, srv *testserver.Redis, prefix string, l sluice.Limit) {
	t.Helper()
	if _, err := srv.Do("RPUSH", Key(prefix, "list", l), "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do("SET", Key(prefix, "text", l), "hello"); err != nil {
		t.Fatal(err)
	}
}

// batchWant is what DecideBatch must answer one request.
type batchWant struct {
	err       error
	allowed   bool
	remaining int
}

// checkBatch decides rs in one DecideBatch and checks each answer
// against want; a request on badKeys' list must fail with a store
// error, not corrupt state.
func checkBatch(t *testing.T, s *Store, rs []sluice.Request, want []batchWant) {
	t.Helper()
	ds, errs := s.DecideBatch(context.Background(), rs)
	for i, w := range want {
		if !errors.Is(errs[i], w.err) || (w.err == nil) != (errs[i] == nil) || ds[i].Allowed != w.allowed || ds[i].Remaining != w.remaining {
			t.Errorf("DecideBatch[%d] (%v %s) = %+v, %v; want allowed %v, Remaining %d, error %v",
				i, rs[i].Op, rs[i].Key, ds[i], errs[i], w.allowed, w.remaining, w.err)
		}
		if rs[i].Key == "list" && errors.Is(errs[i], sluice.ErrCorruptState) {
			t.Errorf("DecideBatch over a list = %v, want a store error, not corrupt state", errs[i])
		}
	}
}

// testBatchCluster counts the script calls of a batch on the Redis
// Cluster of TestCluster: requests of one actor (one slot) are decided in
// one call, requests of actors on other slots in one call per slot.
func testBatchCluster(t *testing.T, nodes []*testserver.Redis, rc rueidis.Client, gc *goredis.ClusterClient) {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	evalshas := func() int64 {
		var n int64
		for _, a := range addrs {
			n += testserver.RedisCalls(a, "evalsha")
		}
		return n
	}
	policy := []sluice.Limit{{Rate: 3, Period: time.Hour}, {Rate: 5, Period: time.Minute}}
	for _, tc := range []struct {
		name string
		c    Config
	}{{"rueidis", Config{Client: rc}}, {"go-redis", Config{GoRedis: gc}}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, tc.c)
			prefix := uniquePrefix(t)
			actors := []string{"alice", "bob", "carol", "dave", "erin", "frank"}
			slots := map[uint16]bool{}
			var rs []sluice.Request
			for range 4 {
				for _, a := range actors {
					rs = append(rs, sluice.Request{Prefix: prefix, Key: a, Limits: policy, Cost: 1, Now: t0})
					slots[slot(Key(prefix, a, policy[0]))] = true
				}
			}
			s.DecideBatch(t.Context(), rs[:len(actors)]) // loads the script on every node
			for _, a := range actors {                   // and forgets the takes
				s.Decide(t.Context(), sluice.Request{Prefix: prefix, Key: a, Limits: policy, Op: sluice.OpReset, Now: t0})
			}
			before := evalshas()
			ds, errs := s.DecideBatch(t.Context(), rs)
			if got := evalshas() - before; got != int64(len(slots)) {
				t.Errorf("DecideBatch(%d requests of %d actors on %d slots): %d EVALSHA, want %d", len(rs), len(actors), len(slots), got, len(slots))
			}
			for i, d := range ds {
				if want := i < 3*len(actors); errs[i] != nil || d.Allowed != want {
					t.Errorf("DecideBatch[%d] (%s) = %+v, %v; want allowed %v", i, rs[i].Key, d, errs[i], want)
				}
			}
			// The Store's slots are Redis's.
			for _, a := range actors {
				k := Key(prefix, a, policy[0])
				got, err := nodes[0].Do("CLUSTER", "KEYSLOT", k)
				if want := strconv.Itoa(int(slot(k))); err != nil || got != want {
					t.Errorf("CLUSTER KEYSLOT %s = %s, %v; want %s", k, got, err, want)
				}
			}
		})
	}
}

// TestBatchServerClock checks that the requests of one script call
// without a time of their own are decided at one reading of the server's
// clock, in whole microseconds.
func TestBatchServerClock(t *testing.T) {
	s := newStore(t, Config{})
	prefix := uniquePrefix(t)
	limits := []sluice.Limit{{Rate: 3, Period: time.Second}}
	rs := make([]sluice.Request, 5)
	for i := range rs {
		rs[i] = sluice.Request{Prefix: prefix, Key: "k", Limits: limits, Cost: 1}
	}
	before := time.Now()
	ds, errs := s.DecideBatch(t.Context(), rs)
	for i, d := range ds {
		if errs[i] != nil || d.Allowed != (i < 3) || !d.Time.Equal(ds[0].Time) {
			t.Errorf("DecideBatch[%d] = %+v, %v; want allowed %v at %v", i, d, errs[i], i < 3, ds[0].Time)
		}
	}
	if tm := ds[0].Time; tm.Before(before.Add(-time.Minute)) || tm.After(time.Now().Add(time.Minute)) || tm.Nanosecond()%1000 != 0 {
		t.Errorf("Decision.Time = %v, want the server's time near %v, in whole microseconds", tm, before)
	}
	// The takes came at one instant: the 4th waits a whole interval
	// (rounded up to a microsecond).
	if want := 333334 * time.Microsecond; ds[3].RetryAfter != want {
		t.Errorf("4th take RetryAfter = %v, want %v", ds[3].RetryAfter, want)
	}
}
