package testserver

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelDownAfter is how long the Sentinel of StartRedisSentinel waits
// for an unreachable master before it fails it over.
const SentinelDownAfter = time.Second

// sentinelTimeout bounds how long the servers of StartRedisSentinel may
// take to replicate and be seen by the Sentinel.
const sentinelTimeout = 20 * time.Second

// A RedisSentinel is a Redis master, one replica of it and one Sentinel
// that monitors them under MasterName (quorum 1, so the Sentinel alone
// decides a failover), each a redis-server process owned by a test. It is
// not safe for concurrent use.
type RedisSentinel struct {
	MasterName string // "mymaster"
	Master     *Redis // the master at start
	Replica    *Redis // its replica at start: the one a failover promotes
	Sentinel   *Redis // the Sentinel: the address clients are given
}

// StartRedisSentinel starts a master, a replica of it and a Sentinel
// (redis-server in sentinel mode) on free loopback ports, each in its own
// directory, and waits until the replica is in sync and the Sentinel sees
// it fit for promotion. They are stopped when the test ends.
func StartRedisSentinel(t testing.TB) *RedisSentinel {
	t.Helper()
	bin := Binary(t, "redis-server")
	rs := &RedisSentinel{MasterName: "mymaster"}
	rs.Master = StartRedis(t, "--repl-diskless-sync-delay", "0") // a replica syncs at once
	rs.Replica = StartRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(rs.Master.Port))
	deadline := time.Now().Add(sentinelTimeout)
	waitRedis(t, deadline, "replica in sync", func() (bool, string) {
		info, err := rs.Replica.Info("replication")
		return err == nil && info["master_link_status"] == "up", fmt.Sprint(info, err)
	})
	master := rs.Master.Port
	dir := t.TempDir()
	s := &Redis{bin: bin, Dir: dir, conf: func(port int) string {
		return fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
dir %[5]q
logfile %[6]q
sentinel monitor %[2]s 127.0.0.1 %[3]d 1
sentinel down-after-milliseconds %[2]s %[4]d
sentinel failover-timeout %[2]s 10000
`, port, rs.MasterName, master, SentinelDownAfter.Milliseconds(), dir, filepath.Join(dir, "redis.log"))
	}}
	var err error
	for range 5 { // another process may take the port between pick and bind
		if s.Port, err = FreePort(); err != nil {
			break
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("start redis-server --sentinel: %v", err)
	}
	t.Cleanup(s.Stop)
	rs.Sentinel = s
	waitRedis(t, deadline, "Sentinel to see the replica", func() (bool, string) {
		out, err := s.Do("SENTINEL", "REPLICAS", rs.MasterName)
		f := fields(out)
		return err == nil && f["name"] == rs.Replica.Addr && f["flags"] == "slave" && f["master-link-status"] == "ok", fmt.Sprint(out, err)
	})
	return rs
}

// MasterAddr returns the address of the master as the Sentinel knows it.
func (rs *RedisSentinel) MasterAddr() (string, error) {
	out, err := rs.Sentinel.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", rs.MasterName)
	if err != nil {
		return "", err
	}
	host, port, ok := strings.Cut(out, "\n")
	if !ok {
		return "", fmt.Errorf("sentinel: master address %q", out)
	}
	return net.JoinHostPort(host, port), nil
}

// Failover asks the Sentinel to fail the master over now (SENTINEL
// FAILOVER), as if it were down: the Sentinel promotes the replica, and
// later turns the old master into its replica.
func (rs *RedisSentinel) Failover() error {
	_, err := rs.Sentinel.Do("SENTINEL", "FAILOVER", rs.MasterName)
	return err
}

// fields reads a flattened reply of field and value pairs, such as
// SENTINEL REPLICAS's for one replica.
func fields(reply string) map[string]string {
	m := map[string]string{}
	f := strings.Split(reply, "\n")
	for i := 0; i+1 < len(f); i += 2 {
		m[f[i]] = f[i+1]
	}
	return m
}

// waitRedis polls cond until it holds, and fails the test at deadline
// with what cond last reported.
func waitRedis(t testing.TB, deadline time.Time, what string, cond func() (bool, string)) {
	t.Helper()
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %s", what, last)
		}
		time.Sleep(20 * time.Millisecond) // polling server state, bounded by deadline
	}
}
