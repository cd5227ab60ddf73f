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
var notSluice = regexp.MustCompile(`(?m)^# Traefik`)

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
