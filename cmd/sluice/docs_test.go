package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// The docs' snippets are run as written by the tests of this file: the
// YAML against the configuration loader (alone, or added to the sample
// when it is a part of a file), the nginx and Caddy blocks in front of a
// real sluice serve of the sample rules, the README's curl lines against
// their shown answers, the Go snippets compiled (docs_go_test.go).
// Addresses are the only change: the snippets' 127.0.0.1:8080 becomes
// the free port the test's server took.

// A docBlock is a fenced block of a Markdown file.
type docBlock struct {
	file string // relative to the repository root
	line int    // of the opening fence
	lang string
	text string
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d (%s)", b.file, b.line, b.lang) }

// docFiles are the pages whose snippets users paste.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../../README.md"}, files...)
}

// docBlocks returns the fenced blocks of every page of docFiles.
func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	var blocks []docBlock
	for _, path := range docFiles(t) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		var cur *docBlock
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			switch {
			case cur == nil && strings.HasPrefix(line, "```"):
				cur = &docBlock{file: strings.TrimPrefix(path, "../../"), line: n, lang: strings.TrimPrefix(line, "```")}
			case cur != nil && line == "```":
				blocks = append(blocks, *cur)
				cur = nil
			case cur != nil:
				cur.text += line + "\n"
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return blocks
}

// blocksOf returns the blocks of lang in file ("" for every file).
func blocksOf(t *testing.T, file, lang string) []docBlock {
	t.Helper()
	var out []docBlock
	for _, b := range docBlocks(t) {
		if b.lang == lang && (file == "" || b.file == file) {
			out = append(out, b)
		}
	}
	return out
}

// notSluice marks the YAML blocks that configure another program.
var notSluice = regexp.MustCompile(`(?m)^# (Traefik|Envoy)`)

// withSample returns a part of a configuration as the file it is added
// to: the sample's sections that the part does not give, then the part.
func withSample(part string) string {
	own := map[string]bool{}
	for _, l := range strings.Split(part, "\n") {
		if k, _, ok := strings.Cut(l, ":"); ok && k != "" && !strings.HasPrefix(k, " ") && !strings.HasPrefix(k, "#") {
			own[k] = true
		}
	}
	var b strings.Builder
	skip := false
	for _, l := range strings.Split(string(config.Sample()), "\n") {
		if k, _, ok := strings.Cut(l, ":"); ok && k != "" && !strings.HasPrefix(k, " ") && !strings.HasPrefix(k, "#") {
			skip = own[k]
		}
		if !skip {
			b.WriteString(l + "\n")
		}
	}
	return b.String() + part
}

// isWholeFile reports whether a YAML block is a whole rules file (it has
// rules) rather than sections to add to one.
func isWholeFile(text string) bool {
	return regexp.MustCompile(`(?m)^rules:`).MatchString(text)
}

// TestDocsYAML loads every YAML block of the docs: a whole rules file as
// it is, sections of one added to the sample (as the README says: take
// the sample, add these). Secrets' variables may be unset, as for sluice
// config validate; any other error fails.
func TestDocsYAML(t *testing.T) {
	dir := t.TempDir()
	for _, b := range blocksOf(t, "", "yaml") {
		if notSluice.MatchString(b.text) {
			continue
		}
		text := b.text
		if !isWholeFile(text) {
			text = withSample(text)
		}
		path := filepath.Join(dir, "sluice.yaml")
		writeFile(t, path, text)
		c, _, err := config.Validate(path)
		if err != nil {
			t.Errorf("%v: %v\n%s", b, err, text)
			continue
		}
		checkPorts(t, b.String(), map[string]string{"listen": c.Listen, "grpc.listen": c.GRPC.Listen, "admin.listen": c.Admin.Listen})
	}
}

// docPort is the port each listener has in the docs: the defaults of
// listen and admin.listen, and 8082 for gRPC, which has no default. A
// listener given another listener's port would stop a reader who runs
// both with "address already in use".
var docPort = map[string]int{"listen": 8080, "admin.listen": 8081, "grpc.listen": 8082}

// checkPorts fails if a listener of addrs (by name, host:port) is on the
// port the docs give another listener, or two share one.
func checkPorts(t *testing.T, where string, addrs map[string]string) {
	t.Helper()
	seen := map[int]string{}
	for name, addr := range addrs {
		_, p, err := splitPort(addr)
		if err != nil || p == 0 {
			continue
		}
		for other, op := range docPort {
			if other != name && op == p {
				t.Errorf("%s: %s %s is on the port of %s", where, name, addr, other)
			}
		}
		if o, ok := seen[p]; ok {
			t.Errorf("%s: %s and %s share port %d", where, name, o, p)
		}
		seen[p] = name
	}
}

func splitPort(addr string) (string, int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return addr, 0, nil
	}
	p, err := strconv.Atoi(addr[i+1:])
	return addr[:i], p, err
}

// listenFlag finds the listeners of command lines in the docs' prose and
// shell blocks.
var listenFlag = regexp.MustCompile(`-(listen|grpc-listen|admin-listen)[ =]([0-9.]+:[0-9]+)|grpc://([0-9.]+:[0-9]+)`)

// TestDocsPorts holds every command line of the docs to docPort: a
// -grpc-listen on the admin API's port makes serve exit as soon as the
// admin token is set.
func TestDocsPorts(t *testing.T) {
	for _, path := range docFiles(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range listenFlag.FindAllStringSubmatch(line, -1) {
				name, addr := m[1], m[2]
				if m[3] != "" {
					name, addr = "grpc-listen", m[3]
				}
				if name != "listen" {
					name = strings.TrimSuffix(name, "-listen") + ".listen"
				}
				checkPorts(t, fmt.Sprintf("%s:%d", strings.TrimPrefix(path, "../../"), i+1), map[string]string{name: addr})
			}
		}
	}
}

// notRun are the pastable blocks no test runs, by page and first line,
// and why. Every other sh, nginx and Caddyfile block must be run by a
// test of this package (the YAML and Go blocks all are).
var notRun = map[string][]struct{ first, why string }{
	"README.md": {
		{"./scripts/setup.sh", "installs packages with sudo and runs the whole suite, this test among it"},
		{"go install ./cmd/sluice", "writes to the user's GOPATH/bin (TestVersionInstalled installs into a directory of its own)"},
		{"sluice simulate -config new.yaml", "needs the reader's own access logs and rule files"},
		{"go get github.com/sluicehq/sluice@latest", "needs the network; go.mod pins what the tests build"},
		{`curl -s --json '{"rule":"reports"`, `"id":"…" stands for the id that acquire answered`},
	},
	"docs/accuracy.md":      {{"go run ./cmd/sluice accuracy", "minutes of CPU: the accuracy package's tests check the same oracles"}},
	"docs/benchmarks.md":    {{"", "benchmarks, minutes each on peers and servers: bench/'s own tests run its harness"}},
	"docs/concurrency.md":   {{"curl -s --json", `"id":"Xq0…" stands for the id that acquire answered`}},
	"docs/login-service.md": {{"location = /login", "TestNginxLoginAttack (server/nginx_login_test.go) runs this nginx configuration, from its own copy"}, {"curl -s --json", `"ticket":"8997…" stands for the ticket begin answered`}},
	"docs/operations.md": {
		{"sluice bans -server https://", "needs the reader's certificates (TestServeTLS covers bans over mutual TLS)"},
		{"sluice bans add -for 1h", "ends by loading the firewall (nft -f -): root on the machine; the README's block runs the same commands"},
		{"printf '%s.%s'", `computes a webhook's signature from the reader's $TS, $BODY and $SECRET`},
		{"GOGC=400", "the same serve as the README's, with settings of the Go runtime"},
	},
	"docs/service.md":  {{"sluice bench", "loads a server for 10 s or 100,000 requests: TestBench runs bench"}},
	"docs/simulate.md": {{"sluice simulate", "needs the reader's access logs (TestSimulateCommand replays a generated one)"}},
}

// TestDocsAccounted holds every pastable block to a test or to a reason
// in notRun, so a new snippet is run or says why not.
func TestDocsAccounted(t *testing.T) {
	run := map[string]bool{} // file:line of the blocks the tests run
	mark := func(b docBlock) { run[fmt.Sprintf("%s:%d", b.file, b.line)] = true }
	mark(onlyBlock(t, "docs/operations.md", "nginx"))
	mark(onlyBlock(t, "docs/operations.md", "caddyfile"))
	mark(blockAfter(t, "README.md", "sh", "With the server of the quick start running"))
	mark(blockAfter(t, "README.md", "sh", "From the shell:"))
	mark(blockAfter(t, "README.md", "sh", "gives a file to start from; add:"))
	mark(blockAfter(t, "docs/operations.md", "sh", "Bearer requests need"))
	mark(blockAfter(t, "docs/operations.md", "sh", "admin API serves it, oldest first:"))
	for _, b := range blocksOf(t, "docs/service.md", "sh") {
		if strings.Contains(b.text, "curl ") {
			mark(b)
		}
	}
	for _, b := range docBlocks(t) {
		if b.lang != "sh" && b.lang != "nginx" && b.lang != "caddyfile" || run[fmt.Sprintf("%s:%d", b.file, b.line)] {
			continue
		}
		first := strings.TrimSpace(strings.SplitN(strings.TrimSpace(b.text), "\n", 2)[0])
		accounted := false
		for _, n := range notRun[b.file] {
			accounted = accounted || strings.HasPrefix(first, n.first)
		}
		if !accounted {
			t.Errorf("%v (%q) is run by no test: run it in a docs test of cmd/sluice, or say why not in notRun", b, first)
		}
	}
}
