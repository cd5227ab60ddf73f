package redis

import (
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testing/leasetest"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestLeaseConformance runs the lease suite on a real redis-server, on
// both clients.
func TestLeaseConformance(t *testing.T) {
	t.Run("rueidis", func(t *testing.T) {
		storetest.RunLeases(t, func(t *testing.T) sluice.LeaseStore { return newStore(t, Config{}) })
	})
	t.Run("go-redis", func(t *testing.T) {
		storetest.RunLeases(t, func(t *testing.T) sluice.LeaseStore {
			c := goredis.NewClient(&goredis.Options{Addr: sharedServer(t).Addr})
			t.Cleanup(func() { c.Close() })
			return newStore(t, Config{GoRedis: c})
		})
	})
}

// TestLeaseProcesses runs 4 OS processes × 64 goroutines acquiring,
// holding and releasing leases on one key of a limit of 8: an observer
// outside the store never counts more than 8 holders.
func TestLeaseProcesses(t *testing.T) {
	srv := sharedServer(t)
	testserver.SkipShort(t, "4 processes × 64 goroutines")
	leasetest.Processes(t, "TestLeaseHolder", 4, leasetest.Params{
		Prefix: uniquePrefix(t), Limit: 8, Goroutines: 64, Rounds: 4, TTL: 10 * time.Second,
	}, helperEnv+"=lease", leaseAddrEnv+"="+srv.Addr)
}

// TestLeaseCrash kills (SIGKILL) a process holding every place of a key:
// its places come back when its leases expire, 2 s later.
func TestLeaseCrash(t *testing.T) {
	srv := sharedServer(t)
	p := leasetest.Params{Prefix: uniquePrefix(t), Limit: 4, Goroutines: 1, Rounds: 1, TTL: 2 * time.Second}
	c, err := sluice.NewConcurrency(newStore(t, Config{}), sluice.ConcurrencyConfig{Limit: p.Limit, TTL: p.TTL, Namespace: p.Prefix, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	leasetest.Crash(t, "TestLeaseHolder", c, "one", p, helperEnv+"=lease", leaseAddrEnv+"="+srv.Addr)
}

// leaseAddrEnv gives a holder process the address of the shared server.
const leaseAddrEnv = "SLUICE_REDIS_LEASE_ADDR"

// TestLeaseHolder is the body of a holder process of TestLeaseProcesses
// and TestLeaseCrash; it does nothing unless they started it.
func TestLeaseHolder(t *testing.T) {
	addr := os.Getenv(leaseAddrEnv)
	if addr == "" {
		return
	}
	s, err := New(Config{Addrs: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	leasetest.Holder(t, s)
}
