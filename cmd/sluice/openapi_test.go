package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// typescriptDir is the TypeScript client generated from the HTTP API's
// OpenAPI description, with its pinned dependencies.
const typescriptDir = "../../clients/typescript"

// TestTypeScriptClient proves that the OpenAPI description generates a
// working client in another language: it generates the client's types
// from server/httpapi/openapi.yaml afresh (so that a change of the
// description that breaks clients fails here), type-checks the program of
// clients/typescript against them with tsc, and runs it with node against
// a real sluice serve. Nothing is fetched: scripts/setup.sh installs the
// dependencies (npm ci); without them the test fails under CI=true and is
// skipped otherwise.
func TestTypeScriptClient(t *testing.T) {
	node := testserver.Binary(t, "node")
	modules := typescriptModules(t)
	work := t.TempDir()
	for _, name := range []string{"main.ts", "tsconfig.json", "package.json"} {
		copyFile(t, filepath.Join(typescriptDir, name), filepath.Join(work, name))
	}
	if err := os.Symlink(modules, filepath.Join(work, "node_modules")); err != nil {
		t.Fatal(err)
	}
	spec, err := filepath.Abs("../../server/httpapi/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	runNode(t, work, node, filepath.Join(modules, "openapi-typescript/bin/cli.js"), spec, "-o", filepath.Join(work, "schema.d.ts"))
	runNode(t, work, node, filepath.Join(modules, "typescript/bin/tsc"), "-p", filepath.Join(work, "tsconfig.json"))

	cfg := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, cfg, "rules:\n  - name: login\n    limits: [\"2/min\"]\n")
	url := startServe(t, "-config", cfg, "-watch=false")
	runNode(t, work, node, filepath.Join(work, "out", "main.js"), url)
}

// typescriptModules returns the absolute path of the client's
// node_modules, or ends the test when npm ci has not installed them: with
// t.Fatal under CI=true, since CI must run the test, with t.Skip
// otherwise.
func typescriptModules(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join(typescriptDir, "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"openapi-typescript/bin/cli.js", "typescript/bin/tsc", "openapi-fetch/package.json"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the TypeScript client's dependencies are missing (run scripts/setup.sh, or npm ci in clients/typescript): %v", err)
			}
			t.Skipf("the TypeScript client's dependencies are missing (run scripts/setup.sh; CI=true would fail): %v", err)
		}
	}
	return dir
}

// runNode runs node with args in dir, failing the test with its output
// if it fails or takes more than two minutes.
func runNode(t *testing.T, dir, node string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node %s: %v\n%s", filepath.Base(args[0]), err, out)
	}
}

// copyFile copies the file from to to.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(b))
}
