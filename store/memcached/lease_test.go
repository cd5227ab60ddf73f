package memcached

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/meta"
	"github.com/sluicehq/sluice/internal/testing/leasetest"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestLeaseConformance runs the lease suite on a real memcached.
func TestLeaseConformance(t *testing.T) {
	srv := testserver.StartMemcached(t)
	storetest.RunLeases(t, func(t *testing.T) sluice.LeaseStore { return newStore(t, Config{Addrs: []string{srv.Addr}}) })
}

// TestLeaseProcesses runs 4 OS processes × 64 goroutines acquiring,
// holding and releasing leases on one key of a limit of 8, racing by
// compare-and-set: an observer outside the store never counts more than 8
// holders.
func TestLeaseProcesses(t *testing.T) {
	srv := testserver.StartMemcached(t)
	testserver.SkipShort(t, "4 processes × 64 goroutines")
	leasetest.Processes(t, "TestLeaseHolder", 4, leasetest.Params{
		Prefix: uniquePrefix(t), Limit: 8, Goroutines: 64, Rounds: 4, TTL: 10 * time.Second,
	}, leaseAddrEnv+"="+srv.Addr)
}

// TestLeaseCrash kills (SIGKILL) a process holding every place of a key:
// its places come back when its leases expire, 2 s later.
func TestLeaseCrash(t *testing.T) {
	srv := testserver.StartMemcached(t)
	p := leasetest.Params{Prefix: uniquePrefix(t), Limit: 4, Goroutines: 1, Rounds: 1, TTL: 2 * time.Second}
	c, err := sluice.NewConcurrency(newStore(t, Config{Addrs: []string{srv.Addr}}),
		sluice.ConcurrencyConfig{Limit: p.Limit, TTL: p.TTL, Namespace: p.Prefix, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	leasetest.Crash(t, "TestLeaseHolder", c, "one", p, leaseAddrEnv+"="+srv.Addr)
}

// leaseAddrEnv gives a holder process the address of the test's server.
const leaseAddrEnv = "SLUICE_MEMCACHED_LEASE_ADDR"

// TestLeaseHolder is the body of a holder process of TestLeaseProcesses
// and TestLeaseCrash; it does nothing unless they started it.
func TestLeaseHolder(t *testing.T) {
	addr := os.Getenv(leaseAddrEnv)
	if addr == "" {
		return
	}
	leasetest.Holder(t, newStore(t, Config{Addrs: []string{addr}, MaxRetries: 1000}))
}

// TestLeaseCorrupt: an item that another program wrote under a lease
// table's key is ErrCorruptState, never a panic or a grant.
func TestLeaseCorrupt(t *testing.T) {
	srv := testserver.StartMemcached(t)
	s := newStore(t, Config{Addrs: []string{srv.Addr}})
	prefix := uniquePrefix(t)
	r := sluice.LeaseRequest{Prefix: prefix, Key: "k", ID: "a", Limit: 2, TTL: time.Minute}
	for _, v := range []string{"", "x", "\x01short", "\x01" + strings.Repeat("\xff", 9), "\x02" + strings.Repeat("a", 20)} {
		b := new(meta.Batch)
		b.Set(leaseKey(keyName(prefix+"k")), []byte(v), time.Minute)
		if err := s.clients[0].Do(context.Background(), b); err != nil || b.Replies[0].Status != meta.StatusOK {
			t.Fatalf("set: %v %v", err, b.Replies)
		}
		if d, err := s.Acquire(t.Context(), r); !errors.Is(err, sluice.ErrCorruptState) || d.Allowed {
			t.Errorf("Acquire over %q = %+v, %v; want ErrCorruptState", v, d, err)
		}
	}
}
