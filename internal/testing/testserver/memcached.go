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
	bin  string
	args []string // as started, the port included
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
	s := &Memcached{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), bin: bin, args: full}
	return s, s.start()
}

// Restart starts the server again on the same port, empty: a crashed
// and restarted memcached.
func (s *Memcached) Restart() error { return restart("memcached", s.Addr, s.Stop, s.start) }

func (s *Memcached) start() error {
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	var exitErr error
	done := make(chan struct{})
	go func() { exitErr = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("memcached exited: %v", exitErr)
		default:
		}
		if c, err := net.DialTimeout("tcp", s.Addr, 100*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(10 * time.Millisecond) // polling for readiness, not logic
	}
	s.Stop()
	return fmt.Errorf("memcached on %s not ready after 5s", s.Addr)
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
