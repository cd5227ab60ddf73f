package redisbans_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startRedis starts a redis-server of the test's own on a free loopback
// port, without persistence, in a temporary directory, and returns a
// client to it; both are stopped when the test ends. Without the binary
// the test fails under CI=true and is skipped otherwise.
//
// (store/redis has a fuller launcher, internal to it; this is the little
// these tests need.)
func startRedis(t *testing.T) *redis.Client {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not found: install it (scripts/setup.sh): %v", err)
		}
		t.Skipf("redis-server not found (CI=true would fail): %v", err)
	}
	dir := t.TempDir()
	for range 5 { // another process may take the port between pick and bind
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server: %v", err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), MaxRetries: -1})
		if waitReady(c, done) {
			t.Cleanup(func() {
				c.Close()
				_ = cmd.Process.Kill()
				<-done
			})
			return c
		}
		c.Close()
		_ = cmd.Process.Kill()
		<-done
	}
	log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
	t.Fatalf("redis-server did not start:\n%s", log)
	return nil
}

// waitReady waits, at most 10 s, until c answers PING; false if the
// server exited first or never answered.
func waitReady(c *redis.Client, exited <-chan struct{}) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return true
		}
		select {
		case <-exited:
			return false
		case <-time.After(20 * time.Millisecond): // polling a starting server, bounded by deadline
		}
	}
	return false
}

// quiet drops go-redis's own log lines, which TestServerDown would fill
// with failed dials.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	os.Exit(m.Run())
}
