package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// snippetImports are the packages the docs' Go snippets use, by name.
var snippetImports = map[string]string{
	"context": "context", "http": "net/http", "time": "time", "strconv": "strconv", "math": "math",
	"netip": "net/netip", "os": "os", "iter": "iter",
	"sluice": "github.com/sluicehq/sluice", "memory": "github.com/sluicehq/sluice/store/memory",
	"redis": "github.com/sluicehq/sluice/store/redis", "memcached": "github.com/sluicehq/sluice/store/memcached",
	"fallback": "github.com/sluicehq/sluice/store/fallback", "httplimit": "github.com/sluicehq/sluice/httplimit",
	"grpclimit": "github.com/sluicehq/sluice/grpclimit", "guard": "github.com/sluicehq/sluice/guard",
	"redisbans": "github.com/sluicehq/sluice/guard/redisbans", "client": "github.com/sluicehq/sluice/client",
	"grpc": "google.golang.org/grpc", "rueidis": "github.com/redis/rueidis", "goredis": "github.com/redis/go-redis/v9",
}

// snippetContext are the variables the snippets take from the program
// around them (or from the snippet before them on the page), by name.
var snippetContext = map[string]string{
	"ctx": "context.Context", "w": "http.ResponseWriter", "clientIP": "string", "tenantID": "string",
	"store": "*memory.Store", "reports": "*sluice.Concurrency", "rpcs": "*sluice.Concurrency",
	"render": "func(context.Context)", "reportsHandler": "http.Handler", "loginHandler": "http.Handler",
	"mux": "*http.ServeMux", "perIPUser": "*sluice.Limiter", "perIP": "*sluice.Limiter",
	"client": "*httplimit.ClientIP", "username": "httplimit.Keyer", "secret": "[]byte",
	"ip": "netip.Addr", "user": "string", "solved": "bool", "passwordOK": "bool",
	"limits": "[]sluice.Limit", "jail": "*guard.Jail",
}

// snippetSource returns a Go file of package docsnippets holding the
// snippet: as it is if it is a declaration, else as the body of a
// function whose parameters are the context it uses. Elisions ("..."
// alone on a line, "{ ... }") are dropped, and each variable the snippet
// declares is used, as the rest of a real program would.
func snippetSource(b docBlock, n int) (string, error) {
	text := strings.ReplaceAll(b.text, "{ ... }", "{}")
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) != "..." {
			lines = append(lines, l)
		}
	}
	text = strings.Join(lines, "\n")
	fset := token.NewFileSet()
	if f, err := parser.ParseFile(fset, "", "package docsnippets\n"+text, 0); err == nil {
		return withImports(f, "package docsnippets\n", text, nil), nil
	}
	body := fmt.Sprintf("func snippet%d() error {\n%s\nreturn nil\n}\n", n, text)
	f, err := parser.ParseFile(fset, "", "package docsnippets\n"+body, 0)
	if err != nil {
		return "", err
	}
	declared, free := map[string]bool{}, map[string]bool{}
	ast.Inspect(f, func(nd ast.Node) bool {
		if as, ok := nd.(*ast.AssignStmt); ok && as.Tok == token.DEFINE {
			for _, l := range as.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name != "_" {
					declared[id.Name] = true
				}
			}
		}
		return true
	})
	selectors := packagesUsed(f)
	ast.Inspect(f, func(nd ast.Node) bool {
		if id, ok := nd.(*ast.Ident); ok && snippetContext[id.Name] != "" && !declared[id.Name] && !selectors[id.Name] {
			free[id.Name] = true
		}
		return true
	})
	var params, uses []string
	for _, name := range sortedKeys(free) {
		params = append(params, name+" "+snippetContext[name])
	}
	for _, name := range sortedKeys(declared) {
		uses = append(uses, "_ = "+name)
	}
	body = fmt.Sprintf("func snippet%d(%s) error {\n%s\n%s\nreturn nil\n}\n", n, strings.Join(params, ", "), text, strings.Join(uses, "\n"))
	f, err = parser.ParseFile(fset, "", "package docsnippets\n"+body, 0)
	if err != nil {
		return "", err
	}
	return withImports(f, "package docsnippets\n", body, declared), nil
}

// packagesUsed returns the names of snippetImports that f selects from.
func packagesUsed(f *ast.File) map[string]bool {
	used := map[string]bool{}
	ast.Inspect(f, func(nd ast.Node) bool {
		if se, ok := nd.(*ast.SelectorExpr); ok {
			if id, ok := se.X.(*ast.Ident); ok && snippetImports[id.Name] != "" {
				used[id.Name] = true
			}
		}
		return true
	})
	return used
}

// withImports returns the file of head and body importing the packages
// f selects from, but for names the snippet declares as variables.
func withImports(f *ast.File, head, body string, declared map[string]bool) string {
	var imp strings.Builder
	for _, name := range sortedKeys(packagesUsed(f)) {
		if !declared[name] {
			fmt.Fprintf(&imp, "import %s %q\n", name, snippetImports[name])
		}
	}
	return head + imp.String() + body
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestDocsGo compiles every Go snippet of the README and docs/, each in
// a file of its own of one package laid over the module (go build
// -overlay), so a renamed function or field breaks the test, not the
// reader's first build.
func TestDocsGo(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	overlay := map[string]string{}
	where := map[string]docBlock{}
	for i, b := range blocksOf(t, "", "go") {
		src, err := snippetSource(b, i)
		if err != nil {
			t.Errorf("%v: does not parse: %v\n%s", b, err, b.text)
			continue
		}
		name := fmt.Sprintf("snippet%d.go", i)
		writeFile(t, filepath.Join(dir, name), src)
		overlay[filepath.Join(root, "internal", "docsnippets", name)] = filepath.Join(dir, name)
		where[name] = b
	}
	data, _ := json.Marshal(map[string]any{"Replace": overlay})
	writeFile(t, filepath.Join(dir, "overlay.json"), string(data))
	cmd := exec.Command(goCmd, "build", "-overlay", filepath.Join(dir, "overlay.json"), "./internal/docsnippets")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		msg := string(out)
		for name, b := range where {
			msg = strings.ReplaceAll(msg, name, name+" ("+b.String()+")")
		}
		t.Errorf("the docs' Go snippets do not compile: %v\n%s", err, msg)
	}
	if len(where) == 0 {
		t.Error("no Go snippets found")
	}
}
