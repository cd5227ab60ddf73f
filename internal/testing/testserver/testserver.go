// Package testserver starts real server processes for tests and
// benchmarks — redis-server (single, over TLS, a cluster or with Sentinel),
// memcached, nginx and caddy —
// each on a free loopback port with its own temporary directory, stopped
// when the test ends. It never touches a shared server.
//
// When a server's binary is missing, the test fails under env CI=true,
// since CI must run every test, and is skipped otherwise.
package testserver

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Binary returns the path of the program name (redis-server, redis-cli,
// redis-benchmark, memcached, nginx), looked up in PATH and then in dirs,
// or ends the test: with t.Fatal when env CI=true, since CI must have it,
// and with t.Skip otherwise.
func Binary(t testing.TB, name string, dirs ...string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	for _, d := range dirs {
		if p := filepath.Join(d, name); isExecutable(p) {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found: install it (scripts/setup.sh): %v", name, err)
	}
	t.Skipf("%s not found (CI=true would fail): %v", name, err)
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// SkipShort skips a slow test under -short, for a quick run on a
// developer's machine; with env CI=true it never skips: CI runs it, -short
// or not.
func SkipShort(t testing.TB, why string) {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skipf("%s; skipped with -short (CI=true runs it)", why)
	}
}

// restart stops the server what at addr and starts it again on the same
// port, retrying while the port lingers for a moment.
func restart(what, addr string, stop func(), start func() error) error {
	stop()
	var err error
	for range 50 {
		if err = start(); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("restart %s on %s: %w", what, addr, err)
}
