// Package mctest starts real memcached servers for tests: each on its own
// free loopback port, stopped by t.Cleanup.
package mctest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// A Server is a memcached process started for one test.
type Server struct {
	Addr string
	cmd  *exec.Cmd
}

// Start starts memcached with the given extra flags (such as "-m", "8")
// on a free port of 127.0.0.1 and waits until it accepts connections. A
// missing binary fails the test under CI=true and skips it otherwise.
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	bin, err := exec.LookPath("memcached")
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("memcached not installed: %v", err)
		}
		tb.Skipf("memcached not installed (%v): CI would fail this test", err)
	}
	var lastErr error
	for range 5 { // a freed port can be taken before memcached binds it
		s, err := start(bin, args)
		if err == nil {
			tb.Cleanup(s.Stop)
			return s
		}
		lastErr = err
	}
	tb.Fatalf("start memcached: %v", lastErr)
	return nil
}

func start(bin string, args []string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	full := []string{"-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-t", "2"}
	if os.Geteuid() == 0 {
		full = append(full, "-u", "root")
	}
	full = append(full, args...)
	cmd := exec.Command(bin, full...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("memcached exited: %v", err)
		default:
		}
		if c, err := net.DialTimeout("tcp", s.Addr, 100*time.Millisecond); err == nil {
			c.Close()
			return s, nil
		}
		time.Sleep(10 * time.Millisecond) // polling for readiness, not logic
	}
	cmd.Process.Kill()
	return nil, fmt.Errorf("memcached on %s not ready after 5s", s.Addr)
}

// Stop kills the server. It is safe to call more than once.
func (s *Server) Stop() {
	if s.cmd.Process != nil {
		s.cmd.Process.Kill()
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
