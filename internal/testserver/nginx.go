package testserver

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// StartNginx runs nginx in the foreground with the configuration conf
// returns for its own prefix directory dir and a free loopback port,
// waits until it listens on 127.0.0.1:port and returns its base URL
// (http://127.0.0.1:port). conf must say "daemon off;", keep its pid,
// logs and temp paths under dir and listen on 127.0.0.1:port. nginx is
// stopped (fast shutdown) when the test ends.
func StartNginx(t testing.TB, conf func(dir string, port int) string) string {
	t.Helper()
	bin := Binary(t, "nginx", "/usr/sbin")
	for attempt := range 3 { // the free port may be taken meanwhile
		dir := t.TempDir()
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		confPath := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(confPath, []byte(conf(dir, port)), 0o600); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"))
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if waitListening(addr, exited, 10*time.Second) {
			t.Cleanup(func() {
				_ = cmd.Process.Signal(os.Interrupt) // fast shutdown
				select {
				case <-exited:
				case <-time.After(10 * time.Second):
					_ = cmd.Process.Kill()
					<-exited
				}
			})
			return "http://" + addr
		}
		_ = cmd.Process.Kill()
		<-exited
		log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		t.Logf("nginx did not start (attempt %d): %s%s", attempt+1, stderr.String(), log)
	}
	t.Fatal("nginx did not start")
	return ""
}

// waitListening reports whether addr accepts connections before the
// process exits or the timeout passes.
func waitListening(addr string, exited <-chan error, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond) // polling a port, not timing logic
	}
	return false
}
