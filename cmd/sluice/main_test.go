package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/wire"
)

// lineWriter is an io.Writer, safe for concurrent use, that sends every
// complete line written to it on lines (dropping lines nobody reads).
type lineWriter struct {
	mu      sync.Mutex
	partial []byte
	all     bytes.Buffer
	lines   chan string
}

func newLineWriter() *lineWriter { return &lineWriter{lines: make(chan string, 64)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.Write(p)
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		select {
		case w.lines <- string(w.partial[:i]):
		default:
		}
		w.partial = w.partial[i+1:]
	}
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all.String()
}

// serve runs "sluice serve" with args until the test ends, and returns
// what it announces on stdout after each of the prefixes (the addresses it
// listens on, such as "sluice: listening on "), in order, with the writer
// of its log. It fails the test if serve stops before announcing them all,
// or does not stop within 15s of the test's end.
func serve(t *testing.T, args []string, prefixes ...string) ([]string, *lineWriter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := newLineWriter(), newLineWriter()
	done := make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"serve"}, args...), stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve returned %v after cancel, want nil", err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("serve did not stop within 15s of cancel")
		}
	})
	got := make([]string, len(prefixes))
	for missing := len(prefixes); missing > 0; {
		select {
		case line := <-stdout.lines:
			for i, p := range prefixes {
				if v, ok := strings.CutPrefix(line, p); ok && got[i] == "" {
					got[i] = v
					missing--
				}
			}
		case err := <-done:
			t.Fatalf("serve returned %v before announcing %q; log %s", err, prefixes, stderr)
		case <-time.After(15 * time.Second):
			t.Fatalf("serve did not announce %q within 15s; log %s", prefixes, stderr)
		}
	}
	return got, stderr
}

// startServe runs "sluice serve" on a free loopback port with args until
// the test ends, checks that it stops cleanly, and returns its URL.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	var stderr *lineWriter
	t.Cleanup(func() { // runs after serve's own cleanup has stopped it
		if stderr != nil && !strings.Contains(stderr.String(), "msg=stopped") {
			t.Errorf("serve log = %q, want a clean stop", stderr.String())
		}
	})
	got, stderr := serve(t, append([]string{"-listen", "127.0.0.1:0"}, args...), "sluice: listening on ")
	return got[0]
}

// runCmd runs the command line and returns its output and error.
func runCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestServeAndCheck(t *testing.T) {
	url := startServe(t)
	tests := []struct {
		args     []string
		wantOut  string
		wantCode int
	}{
		{[]string{"check", "-server", url, "signup", "203.0.113.7"}, "allowed: signup 203.0.113.7: 2 of 3/h sliding left", 0},
		{[]string{"check", "-server", url, "signup", "203.0.113.7", "-cost", "2"}, "allowed: signup 203.0.113.7: 0 of 3/h sliding left", 0},
		{[]string{"check", "-server", url, "-peek", "signup", "203.0.113.7"}, "denied (peek): signup 203.0.113.7: 0 of 3/h sliding left, retry in", 3},
		{[]string{"check", "-server", url, "signup", "203.0.113.7"}, "denied: signup 203.0.113.7: 0 of 3/h sliding left, retry in", 3},
		{[]string{"check", "-server", url + "/", "--", "signup", "-dash-key"}, "allowed: signup -dash-key", 0},
	}
	for _, tt := range tests {
		out, _, err := runCmd(t, tt.args...)
		if code := exitCode(err); code != tt.wantCode || !strings.HasPrefix(out, tt.wantOut) {
			t.Errorf("run(%q) = %q, exit %d (%v); want prefix %q, exit %d", tt.args, out, code, err, tt.wantOut, tt.wantCode)
		}
	}

	out, _, err := runCmd(t, "check", "-json", "-server", url, "api", "k", "-cost", "200")
	var resp wire.CheckResponse
	if err != nil || json.Unmarshal([]byte(out), &resp) != nil {
		t.Fatalf("check -json = %q, %v; want a JSON answer", out, err)
	}
	if want := (wire.CheckResponse{Allowed: true, Rule: "api", Limit: 100, Policy: "100/s burst 200", Remaining: 0, ResetAfter: 2}); !reflect.DeepEqual(resp, want) {
		t.Errorf("check -json = %+v, want %+v", resp, want)
	}

	// Errors of the server reach the user.
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "-server", url, "nope", "k"}, `400 Bad Request: unknown rule "nope"`},
		{[]string{"check", "-server", url, "login", "k", "-cost", "6"}, "exceeds the burst"},
	} {
		if _, _, err := runCmd(t, tt.args...); exitCode(err) != 1 || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run(%q) error = %v, want exit 1 and %q", tt.args, err, tt.want)
		}
	}
}

func TestServeConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	writeFile(t, good, "listen: 127.0.0.1:1\nrules:\n  - name: once\n    limits: [\"1/h\"]\n")
	url := startServe(t, "-config", good) // -listen overrides the file
	t.Setenv("SLUICE_SERVER", url)
	if _, _, err := runCmd(t, "check", "once", "k"); err != nil {
		t.Errorf("first check of 1/h: %v, want allowed", err)
	}
	if out, _, err := runCmd(t, "check", "once", "k"); !errors.Is(err, errDenied) || !strings.Contains(out, "denied: once k: 0 of 1/h left, retry in ") {
		t.Errorf("second check of 1/h = %q, %v; want denied by 1/h", out, err)
	}

	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "rules:\n  - name: x\n    limits: [\"1/h\"]\n    burst: 3\n")
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"serve", "-config", bad}, 1, bad + `:4:5: rules[0]: unknown field "burst"`},
		{[]string{"serve", "-config", filepath.Join(dir, "missing.yaml")}, 1, "no such file"},
		{[]string{"serve", "-listen", "256.0.0.1:0"}, 1, "256.0.0.1"},
		{[]string{"serve", good}, 2, "unexpected argument"},
		{[]string{"serve", "-nope"}, 2, "unknown flag -nope"},
	} {
		_, _, err := runCmd(t, tt.args...)
		if exitCode(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run(%q) error = %v, want exit %d and %q", tt.args, err, tt.code, tt.want)
		}
	}
}

// TestServeShutdownIdle checks that cancelling serve's context stops it
// cleanly and closes its listener.
func TestServeShutdownIdle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	stdout := newLineWriter()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve", "-listen", "127.0.0.1:0"}, stdout, newLineWriter()) }()
	var addr string
	select {
	case line := <-stdout.lines:
		addr = strings.TrimPrefix(line, "sluice: listening on http://")
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not start within 15s")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after cancel = %v, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop within 15s")
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("dial %s after shutdown succeeded, want the listener closed", addr)
	}
}

func TestCheckErrors(t *testing.T) {
	// A port nobody listens on: listen, note it, close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"check", "-server", closed, "login", "k"}, 1, "connection refused"},
		{[]string{"check", "-server", "::bad", "login", "k"}, 1, "missing protocol scheme"},
		{[]string{"check", "login"}, 2, "want RULE and KEY, got 1"},
		{[]string{"check", "login", "k", "extra"}, 2, "want RULE and KEY, got 3"},
		{[]string{"check", "-cost", "0", "login", "k"}, 2, "-cost 0 must be at least 1"},
		{[]string{"check", "-cost", "x", "login", "k"}, 2, `invalid value "x" for flag -cost`},
	} {
		_, _, err := runCmd(t, tt.args...)
		if exitCode(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run(%q) error = %v, want exit %d and %q", tt.args, err, tt.code, tt.want)
		}
	}
}

func TestConfigCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	out, _, err := runCmd(t, "config", "sample")
	if err != nil {
		t.Fatalf("config sample: %v", err)
	}
	writeFile(t, good, out)
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "rules:\n  - name: a\n    limits: [\"5/min\"]\n  - name: a\n    limits: [\"1/s\"]\n")

	out, _, err = runCmd(t, "config", "validate", good)
	if err != nil || !strings.HasPrefix(out, good+": ok: 3 rules, 1 login, store memory, listen 127.0.0.1:8080\n") ||
		!strings.Contains(out, "  login   5/min, 20/h\n") {
		t.Errorf("config validate good = %q, %v; want ok and the rules", out, err)
	}
	out, errOut, err := runCmd(t, "config", "validate", good, bad)
	var printed bytes.Buffer
	report(&printed, err)
	if want := bad + `:4:11: rules[1].name: rule "a" is already defined at line 2` + "\n"; exitCode(err) != 1 || printed.String() != want || out != "" || errOut != "" {
		t.Errorf("config validate good bad = %q, %q, and prints %q, exit %d; want only bad's error, %q, and exit 1", out, errOut, printed.String(), exitCode(err), want)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"config"}, "want"},
		{[]string{"config", "validate"}, "at least one FILE"},
		{[]string{"config", "sample", "x"}, "takes no arguments"},
		{[]string{"config", "lint"}, `unknown subcommand "lint"`},
	} {
		if _, _, err := runCmd(t, tt.args...); exitCode(err) != 2 || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run(%q) error = %v, want exit 2 and %q", tt.args, err, tt.want)
		}
	}
	if _, err := config.Parse("sample", config.Sample()); err != nil {
		t.Errorf("the sample does not parse: %v", err)
	}
}

func TestHelpAndUsage(t *testing.T) {
	out, _, err := runCmd(t, "--help")
	if err != nil {
		t.Fatalf("--help: %v", err)
	}
	commands := []string{"serve", "check", "bans", "config", "bench", "accuracy", "version"}
	for _, cmd := range append(commands, "help") {
		if !strings.Contains(out, "\n  "+cmd+" ") {
			t.Errorf("--help does not list %q on a line of its own:\n%s", cmd, out)
		}
	}
	for _, cmd := range commands {
		out, _, err := runCmd(t, cmd, "-h")
		if !errors.Is(err, flag.ErrHelp) || exitCode(err) != 0 || !strings.Contains(out, "usage: sluice "+cmd) || !strings.Contains(out, "Example") {
			t.Errorf("%s -h = %q, %v; want its usage with an example, exit 0", cmd, out, err)
		}
	}
	if _, errOut, err := runCmd(t); exitCode(err) != 2 || !strings.Contains(errOut, "Commands:") {
		t.Errorf("no arguments: exit %d, stderr %q; want 2 and the usage", exitCode(err), errOut)
	}
	if _, _, err := runCmd(t, "serv"); exitCode(err) != 2 || !strings.Contains(err.Error(), `unknown command "serv"`) {
		t.Errorf("unknown command: %v, want exit 2", err)
	}
}

func TestVersion(t *testing.T) {
	out, _, err := runCmd(t, "version")
	if err != nil || !strings.HasPrefix(out, "sluice ") || !strings.Contains(out, "go1.") {
		t.Errorf("version = %q, %v; want sluice VERSION (... go1.x ...)", out, err)
	}
	if _, _, err := runCmd(t, "version", "x"); exitCode(err) != 2 {
		t.Errorf("version x: %v, want exit 2", err)
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{flag.ErrHelp, 0},
		{errors.New("boom"), 1},
		{usageError("bad"), 2},
		{errDenied, 3},
	}
	for _, tt := range tests {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTuneGC checks serve's collector setting: GOGC=400 on a shared store
// unless the GOGC variable is set, Go's own on the memory store, and a
// memory limit a quarter above the memory store's MaxBytes unless the
// GOMEMLIMIT variable is set.
func TestTuneGC(t *testing.T) {
	prev, prevLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(prev); debug.SetMemoryLimit(prevLimit) })
	const maxBytes = 64 << 20
	for _, tt := range []struct {
		store    string
		gogc     string
		memlimit string
		want     int
		limited  bool // a limit of 1.25 times maxBytes beyond what the runtime holds
	}{
		{config.StoreRedis, "", "", sharedStoreGOGC, false},
		{config.StoreMemcached, "", "", sharedStoreGOGC, false},
		{config.StoreMemory, "", "", 100, true},
		{config.StoreMemory, "", "1GiB", 100, false}, // the variable's, which the runtime read at start
		{config.StoreRedis, "150", "", 100, false},
	} {
		t.Setenv("GOGC", tt.gogc)
		t.Setenv("GOMEMLIMIT", tt.memlimit)
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
		tuneGC(config.Store{Type: tt.store, Memory: config.MemoryStore{MaxBytes: maxBytes}})
		if got := debug.SetGCPercent(100); got != tt.want {
			t.Errorf("store %s, GOGC=%q: GOGC %d, want %d", tt.store, tt.gogc, got, tt.want)
		}
		limit := debug.SetMemoryLimit(math.MaxInt64)
		// The limit counts what the runtime held at the call (in a test
		// binary, what the tests before this one left): at most all it
		// has mapped now.
		held := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
		metrics.Read(held)
		if limited := limit >= maxBytes*5/4 && limit <= maxBytes*5/4+int64(held[0].Value.Uint64()); limited != tt.limited || !tt.limited && limit != math.MaxInt64 {
			t.Errorf("store %s, GOMEMLIMIT=%q: memory limit %d, want limited %v (MaxBytes %d)", tt.store, tt.memlimit, limit, tt.limited, maxBytes)
		}
	}
}
