package redis

import (
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// shared is one redis-server for the tests that need no special server,
// started by TestMain; nil when redis-server is missing.
var shared *testserver.Redis

// helperEnv marks a child process of TestAtomicProcesses.
const helperEnv = "SLUICE_REDIS_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(m.Run()) // a helper process of TestAtomicProcesses
	}
	var dir string
	if bin, err := exec.LookPath("redis-server"); err == nil {
		dir, err = os.MkdirTemp("", "sluice-redis-test")
		if err == nil {
			shared, err = testserver.LaunchRedis(bin, dir)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "start redis-server:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// sharedServer returns the shared server, or ends the test when
// redis-server is missing (t.Fatal under CI=true, t.Skip otherwise).
func sharedServer(t testing.TB) *testserver.Redis {
	t.Helper()
	if shared == nil {
		testserver.Binary(t, "redis-server")
		t.Fatal("redis-server found but not started")
	}
	return shared
}

// newStore returns a Store on the shared server, closed when the test
// ends.
func newStore(t testing.TB, c Config) *Store {
	t.Helper()
	if c.Client == nil && c.GoRedis == nil && c.Addrs == nil {
		c.Addrs = []string{sharedServer(t).Addr}
	}
	s, err := New(c)
	if err != nil {
		t.Fatalf("New(%+v) = %v", c, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var prefixSeq atomic.Int64

// uniquePrefix returns a key prefix no other test uses.
func uniquePrefix(t testing.TB) string {
	return fmt.Sprintf("test:%s:%d:%d:", t.Name(), time.Now().UnixNano(), prefixSeq.Add(1))
}

// t0 is the start of every trace: a real date on the microsecond grid.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
