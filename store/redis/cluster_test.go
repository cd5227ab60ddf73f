package redis

import (
	"context"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestCluster starts a real Redis Cluster of three masters and runs the
// conformance suite against it, then a multi-limit policy on many actors
// whose keys must each stay on one slot while the actors spread over the
// nodes, through rueidis and go-redis cluster clients.
func TestCluster(t *testing.T) {
	testserver.SkipShort(t, "starts a 3-node cluster")
	nodes := testserver.StartRedisCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis.NewClient(cluster) = %v", err)
	}
	t.Cleanup(rc.Close)
	gc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { gc.Close() })

	t.Run("conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) sluice.Store { return newStore(t, Config{Client: rc}) })
	})
	t.Run("batch/rueidis", func(t *testing.T) {
		storetest.RunBatch(t, func(t *testing.T) storetest.BatchStore { return newStore(t, Config{Client: rc}) })
	})
	t.Run("batch/go-redis", func(t *testing.T) {
		storetest.RunBatch(t, func(t *testing.T) storetest.BatchStore { return newStore(t, Config{GoRedis: gc}) })
	})
	t.Run("batch/calls", func(t *testing.T) { testBatchCluster(t, nodes, rc, gc) })
	t.Run("leases/rueidis", func(t *testing.T) {
		storetest.RunLeases(t, func(t *testing.T) sluice.LeaseStore { return newStore(t, Config{Client: rc}) })
	})
	t.Run("leases/go-redis", func(t *testing.T) {
		storetest.RunLeases(t, func(t *testing.T) sluice.LeaseStore { return newStore(t, Config{GoRedis: gc}) })
	})

	policy := []sluice.Limit{
		{Rate: 3, Period: time.Minute},
		{Rate: 5, Period: time.Hour, Algorithm: sluice.SlidingWindow, Buckets: 6},
		{Rate: 4, Period: time.Hour, Algorithm: sluice.FixedWindow, Staggered: true},
		{Rate: 6, Period: time.Hour, Algorithm: sluice.SlidingLog},
	}
	for _, tc := range []struct {
		name string
		c    Config
	}{{"rueidis", Config{Client: rc}}, {"go-redis", Config{GoRedis: gc}}} {
		t.Run("policy/"+tc.name, func(t *testing.T) {
			s := newStore(t, tc.c)
			prefix := uniquePrefix(t)
			const actors = 60
			for i := range actors {
				key := "{user}" + strconv.Itoa(i) + "}{" // braces that would break a naive tag
				allowed := 0
				for range 5 {
					d := take(t, s, sluice.Request{Prefix: prefix, Key: key, Limits: policy, Cost: 1, Now: t0})
					if d.Allowed {
						allowed++
					} else if d.Limit != policy[0] {
						t.Errorf("actor %d denied by %v, want %v", i, d.Limit, policy[0])
					}
				}
				if allowed != 3 {
					t.Errorf("actor %d: %d of 5 allowed, want 3", i, allowed)
				}
			}
			// Every actor's keys on one slot, the actors over every node.
			perNode := map[string]int{}
			for i := range actors {
				key := "{user}" + strconv.Itoa(i) + "}{"
				slot := -1
				for _, l := range policy {
					got, err := nodes[0].Do("CLUSTER", "KEYSLOT", Key(prefix, key, l))
					n, _ := strconv.Atoi(got)
					if err != nil || (slot >= 0 && n != slot) {
						t.Fatalf("actor %d: keys on slots %d and %s (%v)", i, slot, got, err)
					}
					slot = n
				}
				for _, node := range nodes {
					if c, _ := node.Do("CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot)); c != "0" {
						perNode[node.Addr]++
					}
				}
			}
			if len(perNode) != len(nodes) {
				t.Errorf("actors spread over %d nodes (%v), want %d", len(perNode), perNode, len(nodes))
			}
			// A batch spanning the nodes.
			var rs []sluice.Request
			for i := range actors {
				rs = append(rs, sluice.Request{Prefix: prefix, Key: "batch" + strconv.Itoa(i), Limits: policy, Cost: 1, Now: t0})
			}
			ds, errs := s.DecideBatch(context.Background(), rs)
			for i := range ds {
				if errs[i] != nil || !ds[i].Allowed {
					t.Fatalf("batch[%d] = %+v, %v; want allowed", i, ds[i], errs[i])
				}
			}
		})
	}
}
