package bench

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startRedis starts a redis-server on a free loopback port for one
// benchmark or test, persistence off, stopped by its Cleanup. A missing
// binary fails under CI=true and skips otherwise.
func startRedis(tb testing.TB) string {
	tb.Helper()
	bin := redisBinary(tb, "redis-server")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := tb.TempDir()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if _, err := redisDo(addr, "PING"); err == nil {
			return addr
		}
		time.Sleep(10 * time.Millisecond) // waiting for the server to listen
	}
	tb.Fatal(fmt.Errorf("redis-server on %s not ready after 5s", addr))
	return ""
}

// redisBinary returns the path of a Redis tool, failing under CI=true
// and skipping otherwise when it is missing.
func redisBinary(tb testing.TB, name string) string {
	tb.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("%s not installed: %v", name, err)
		}
		tb.Skipf("%s not installed (%v): CI would fail this benchmark", name, err)
	}
	return bin
}

// redisDo sends one command on a fresh connection and returns a status,
// integer or bulk reply as text: for setup and INFO, not for load.
func redisDo(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch {
	case line == "":
		return "", fmt.Errorf("empty reply")
	case line[0] == '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case line[0] == '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return line[1:], nil
}

// redisCalls returns the calls of command cmd (lower case) since the
// server started, from INFO commandstats.
func redisCalls(addr, cmd string) int64 {
	info, err := redisDo(addr, "INFO", "commandstats")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _, _ := strings.Cut(v, ",")
			c, _ := strconv.ParseInt(n, 10, 64)
			return c
		}
	}
	return 0
}
