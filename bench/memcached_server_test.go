package bench

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// startMemcached starts a memcached on a free loopback port for one
// benchmark or test, stopped by its Cleanup. A missing binary fails under
// CI=true and skips otherwise.
func startMemcached(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("memcached")
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("memcached not installed: %v", err)
		}
		tb.Skipf("memcached not installed (%v): CI would fail this benchmark", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	args := []string{"-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-t", "2", "-m", "256", "-c", "4096"}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "root")
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(10 * time.Millisecond) // waiting for the server to listen
	}
	tb.Fatal(fmt.Errorf("memcached on %s not ready after 5s", addr))
	return ""
}
