package testserver

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// A Memcached is a memcached process started for one test. Stop is safe
// to call more than once, but not concurrently.
type Memcached struct {
	Addr string        // host:port
	cmd  *exec.Cmd     // nil once stopped
	done chan struct{} // closed when cmd has exited
}

// StartMemcached starts memcached with the given extra flags (such as
// "-m", "8") on a free port of 127.0.0.1, 2 threads, UDP off, and waits
// until it accepts connections. It is stopped when the test ends.
func StartMemcached(tb testing.TB, args ...string) *Memcached {
	tb.Helper()
	bin := Binary(tb, "memcached")
	var lastErr error
	for range 5 { // a freed port can be taken before memcached binds it
		s, err := startMemcached(bin, args)
		if err == nil {
			tb.Cleanup(s.Stop)
			return s
		}
		lastErr = err
	}
	tb.Fatalf("start memcached: %v", lastErr)
	return nil
}

func startMemcached(bin string, args []string) (*Memcached, error) {
	port, err := FreePort()
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
	var exitErr error
	done := make(chan struct{})
	go func() { exitErr = cmd.Wait(); close(done) }()
	s := &Memcached{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, done: done}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		select {
		case <-done:
			return nil, fmt.Errorf("memcached exited: %v", exitErr)
		default:
		}
		if c, err := net.DialTimeout("tcp", s.Addr, 100*time.Millisecond); err == nil {
			c.Close()
			return s, nil
		}
		time.Sleep(10 * time.Millisecond) // polling for readiness, not logic
	}
	s.Stop()
	return nil, fmt.Errorf("memcached on %s not ready after 5s", s.Addr)
}

// Stop kills the server, if it runs, and waits for it to exit.
func (s *Memcached) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}
