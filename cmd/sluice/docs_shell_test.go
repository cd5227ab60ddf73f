package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// A shell types a page's command lines, one at a time, into one sh, as
// a reader does: variables and background jobs carry over from line to
// line, sluice is this test binary, what a line prints on standard
// output is its output (standard error is kept apart), and after a line that starts a
// server (ending in &, or a sluice serve the reader would leave running)
// it waits until the server's addresses accept connections.
type shell struct {
	t      *testing.T
	dir    string
	subst  *strings.Replacer // the docs' addresses to the test's
	ready  []string          // the addresses a server line waits for
	stdin  io.WriteCloser
	lines  chan string
	cmd    *exec.Cmd
	nextRC int
	pids   []int // of the servers started
	stderr *lineWriter
}

// newShell starts sh in dir with env added, sluice on its PATH, until
// the test ends; it stops the servers the lines left running.
func newShell(t *testing.T, dir string, env []string, subst *strings.Replacer, ready ...string) *shell {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(bin, "sluice"), "#!/bin/sh\n"+runMainEnv+"=1 exec "+strconv.Quote(self)+" \"$@\"\n")
	if err := os.Chmod(filepath.Join(bin, "sluice"), 0o755); err != nil {
		t.Fatal(err)
	}
	sh := &shell{t: t, dir: dir, subst: subst, ready: ready, lines: make(chan string, 1024)}
	sh.cmd = exec.Command("sh")
	sh.cmd.Dir = dir
	sh.cmd.Env = append(append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH")), env...)
	sh.stdin, _ = sh.cmd.StdinPipe()
	out, _ := sh.cmd.StdoutPipe()
	sh.stderr = newLineWriter() // curl's progress meters, the servers' logs
	sh.cmd.Stderr = sh.stderr
	if err := sh.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			sh.lines <- sc.Text()
		}
		close(sh.lines)
	}()
	t.Cleanup(func() {
		for _, pid := range sh.pids {
			syscall.Kill(pid, syscall.SIGTERM)
		}
		io.WriteString(sh.stdin, "wait\nexit 0\n")
		sh.stdin.Close()
		done := make(chan error, 1)
		go func() { done <- sh.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			sh.cmd.Process.Kill()
			t.Error("the docs' shell did not stop")
		}
	})
	return sh
}

// run types line and returns what it printed and its exit status.
func (sh *shell) run(line string) (string, int) {
	sh.t.Helper()
	line = sh.subst.Replace(line)
	server := strings.HasSuffix(line, "&") || strings.HasPrefix(line, "sluice serve")
	if server && !strings.HasSuffix(line, "&") {
		line += " &"
	}
	sh.nextRC++
	marker := fmt.Sprintf("__docs_rc_%d=", sh.nextRC)
	fmt.Fprintf(sh.stdin, "%s\necho %s$?\n", line, marker)
	if server {
		fmt.Fprintf(sh.stdin, "echo __docs_pid=$!\n")
	}
	var out strings.Builder
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-sh.lines:
			if !ok {
				sh.t.Fatalf("%s: the shell ended:\n%s", line, out.String())
			}
			if before, rc, found := strings.Cut(l, marker); found { // after output with no newline, on its line
				if before != "" {
					out.WriteString(before + "\n")
				}
				n, _ := strconv.Atoi(rc)
				if server {
					sh.pids = append(sh.pids, sh.pid(line))
					sh.waitReady(line, &out)
				}
				return out.String(), n
			}
			if !announcement(l) {
				out.WriteString(l + "\n")
			}
		case <-deadline:
			sh.t.Fatalf("%s: no end within 30s:\n%s", line, out.String())
		}
	}
}

// announcement reports whether l is a background server's line of
// where it listens, which may come out after the line that started it.
func announcement(l string) bool {
	for _, p := range []string{"sluice: listening on ", "sluice: admin on ", "sluice: grpc on "} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// pid reads the process id of the server line started.
func (sh *shell) pid(line string) int {
	sh.t.Helper()
	for l := range sh.lines {
		if v, ok := strings.CutPrefix(l, "__docs_pid="); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	sh.t.Fatalf("%s: the shell ended before naming the server's pid", line)
	return 0
}

// waitReady waits until the ready addresses accept connections.
func (sh *shell) waitReady(line string, out *strings.Builder) {
	sh.t.Helper()
	for _, addr := range sh.ready {
		for start := time.Now(); ; {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Since(start) > 30*time.Second {
				sh.t.Fatalf("%s: %s does not accept connections after 30s: %v\n%s", line, addr, err, out.String())
			}
			select {
			case l := <-sh.lines: // the server's log, meanwhile
				out.WriteString(l + "\n")
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// commandLines returns the lines of a shell block to type: comments and
// blank lines dropped.
func commandLines(text string) []string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

// blockAfter returns the block of lang in file that follows the prose
// line containing text.
func blockAfter(t *testing.T, file, lang, text string) docBlock {
	t.Helper()
	data, err := os.ReadFile("../../" + file)
	if err != nil {
		t.Fatal(err)
	}
	at := strings.Index(string(data), text)
	if at < 0 {
		t.Fatalf("%s does not say %q", file, text)
	}
	line := strings.Count(string(data[:at]), "\n") + 1
	for _, b := range blocksOf(t, file, lang) {
		if b.line > line {
			return b
		}
	}
	t.Fatalf("%s has no %s block after %q", file, lang, text)
	return docBlock{}
}

// freeAddr returns a free loopback address.
func freeAddr(t *testing.T) string {
	t.Helper()
	p, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(p)
}

// TestDocsREADMEShell types the README's command lines of "Ask the
// service" (sluice check against the quick start's server, config
// validate of the README's rules file, serve of it) and of "Operate it"
// (the sample with the admin section added, served in the background,
// bans added, listed, lifted and exported, the metrics read with curl),
// each on free ports in place of the docs' 8080, 8081 and 9000.
func TestDocsREADMEShell(t *testing.T) {
	testserver.Binary(t, "curl")
	dir := t.TempDir()
	quick := startServe(t) // the quick start's server, for sluice check
	http, admin, other := freeAddr(t), freeAddr(t), freeAddr(t)
	subst := strings.NewReplacer("127.0.0.1:8080", http, "127.0.0.1:8081", admin, "127.0.0.1:9000", other)

	rules := blockAfter(t, "README.md", "yaml", "A rules file:")
	writeFile(t, filepath.Join(dir, "my-rules.yaml"), subst.Replace(rules.text))
	ask := blockAfter(t, "README.md", "sh", "From the shell:")
	sh := newShell(t, dir, []string{"SLUICE_SERVER=" + quick}, subst, other)
	for _, line := range commandLines(ask.text) {
		out, rc := sh.run(line)
		if rc != 0 || strings.HasPrefix(line, "sluice check") && !strings.HasPrefix(out, "allowed: login 203.0.113.7") {
			t.Errorf("%v: %s = exit %d:\n%s", ask, line, rc, out)
		}
	}

	// "sluice config sample > sluice.yaml gives a file to start from; add:"
	add := blockAfter(t, "README.md", "yaml", "gives a file to start from; add:")
	sample, _, err := runCmd(t, "config", "sample")
	if err != nil {
		t.Fatal(err)
	}
	conf := subst.Replace(sample) + strings.Replace(add.text, "admin:\n", "admin:\n  listen: "+admin+"\n", 1)
	writeFile(t, filepath.Join(dir, "sluice.yaml"), conf)
	ops := blockAfter(t, "README.md", "sh", "gives a file to start from; add:")
	sh = newShell(t, dir, []string{"SLUICE_ADMIN=http://" + admin}, subst, http, admin)
	want := map[string]string{"sluice bans list": "203.0.113.7", "sluice bans export": "table", "curl": "sluice_"}
	for _, line := range commandLines(ops.text) {
		out, rc := sh.run(line)
		w := ""
		for prefix, s := range want {
			if strings.HasPrefix(line, prefix) {
				w = s
			}
		}
		if rc != 0 || !strings.Contains(out, w) {
			t.Errorf("%v: %s = exit %d, want 0 and %q in:\n%s", ops, line, rc, w, out)
		}
	}
}

// TestDocsServiceCurl types the curl lines of docs/service.md's HTTP
// API against sluice serve with the page's own rules (its first YAML
// block): each answers JSON that reports no error.
func TestDocsServiceCurl(t *testing.T) {
	testserver.Binary(t, "curl")
	dir := t.TempDir()
	http := freeAddr(t)
	subst := strings.NewReplacer("localhost:8080", http, "127.0.0.1:8080", http)
	writeFile(t, filepath.Join(dir, "sluice.yaml"), blocksOf(t, "docs/service.md", "yaml")[0].text)
	sh := newShell(t, dir, nil, subst, http)
	if out, rc := sh.run("sluice serve -config sluice.yaml -listen " + http); rc != 0 {
		t.Fatalf("serve: exit %d\n%s", rc, out)
	}
	n := 0
	for _, b := range blocksOf(t, "docs/service.md", "sh") {
		for _, line := range commandLines(b.text) {
			if !strings.HasPrefix(line, "curl") {
				continue
			}
			n++
			out, rc := sh.run(line)
			last := strings.TrimSpace(out[strings.LastIndexByte(strings.TrimSpace(out), '\n')+1:])
			if rc != 0 || last != "" && !json.Valid([]byte(last)) || strings.Contains(last, `"error"`) { // reset answers 204
				t.Errorf("%v: %s = exit %d:\n%s", b, line, rc, out)
			}
		}
	}
	if n < 10 {
		t.Errorf("typed %d curl lines of docs/service.md, want its 12", n)
	}
}

// TestDocsAdminCurl types the admin API's curl lines of
// docs/operations.md against sluice serve with the README's admin
// section added to the sample: each answers JSON that reports no error,
// or writes its profile to the file it names.
func TestDocsAdminCurl(t *testing.T) {
	testserver.Binary(t, "curl")
	dir := t.TempDir()
	http, admin := freeAddr(t), freeAddr(t)
	subst := strings.NewReplacer("127.0.0.1:8080", http, "127.0.0.1:8081", admin)
	add := blockAfter(t, "README.md", "yaml", "gives a file to start from; add:")
	sample, _, err := runCmd(t, "config", "sample")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sluice.yaml"), subst.Replace(sample)+strings.Replace(add.text, "admin:\n", "admin:\n  listen: "+admin+"\n", 1))
	sh := newShell(t, dir, []string{"SLUICE_ADMIN_TOKEN=docs-test-token-0123456789"}, subst, http, admin)
	if out, rc := sh.run("sluice serve -config sluice.yaml"); rc != 0 {
		t.Fatalf("serve: exit %d\n%s", rc, out)
	}
	for _, b := range []docBlock{
		blockAfter(t, "docs/operations.md", "sh", "Bearer requests need"),
		blockAfter(t, "docs/operations.md", "sh", "admin API serves it, oldest first:"),
	} {
		for _, line := range commandLines(b.text) {
			out, rc := sh.run(line)
			last := strings.TrimSpace(out[strings.LastIndexByte(strings.TrimSpace(out), '\n')+1:])
			if rc != 0 || last != "" && !json.Valid([]byte(last)) || strings.Contains(last, `"error"`) {
				t.Errorf("%v: %s = exit %d:\n%s", b, line, rc, out)
			}
		}
	}
	for _, f := range []string{"cpu.pprof", "heap.pprof"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v, want the profile", f, err)
		}
	}
}
