package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// missingDependency is the exit status of a client's test runner whose
// framework or extension is missing (automake's "skipped").
const missingDependency = 77

// TestPythonClient runs the tests of clients/python (python3 -m
// unittest: the client, Django's test client, Flask's) against sluice
// serve processes they start from this test binary. They need Django and
// Flask, which scripts/setup.sh installs from Debian's packages for
// /usr/bin/python3; without them the test fails under CI=true and is
// skipped otherwise.
func TestPythonClient(t *testing.T) {
	t.Parallel()
	python := pythonWith(t, "django", "flask")
	runClientTests(t, "python", python, "-W", "ignore::ResourceWarning", "-m", "unittest", "discover", "-s", "tests", "-t", ".")
}

// TestPHPClient runs the tests of clients/php (php tests/run.php: the
// client, and the PSR-15 middleware with nyholm/psr7's messages), which
// need php-cli, php-curl, php-psr and php-nyholm-psr7.
func TestPHPClient(t *testing.T) {
	t.Parallel()
	php := testserver.Binary(t, "php")
	runClientTests(t, "php", php, "tests/run.php")
}

// TestRubyClient runs the tests of clients/ruby (minitest: the client,
// and the Rack middleware through Rack::Test), which need ruby,
// ruby-rack and ruby-rack-test.
func TestRubyClient(t *testing.T) {
	t.Parallel()
	ruby := testserver.Binary(t, "ruby")
	runClientTests(t, "ruby", ruby, "-Ilib", "-Itests", "tests/run.rb")
}

// pythonWith returns a python3 that imports every module of mods:
// /usr/bin/python3 first, the one Debian's packages install for, then
// python3 on PATH.
func pythonWith(t *testing.T, mods ...string) string {
	t.Helper()
	var candidates []string
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		candidates = append(candidates, "/usr/bin/python3")
	}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	if len(candidates) == 0 {
		testserver.Binary(t, "python3") // fails or skips
	}
	imports := "import " + mods[0]
	for _, m := range mods[1:] {
		imports += ", " + m
	}
	var last []byte
	for _, p := range candidates {
		out, err := exec.Command(p, "-c", imports).CombinedOutput()
		if err == nil {
			return p
		}
		last = out
	}
	missing(t, "python3 with "+imports[len("import "):]+" (scripts/setup.sh installs python3-django and python3-flask)", string(last))
	return ""
}

// missing ends the test for a missing dependency: t.Fatal under
// CI=true, since CI must run every test, t.Skip otherwise.
func missing(t *testing.T, what, detail string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing: %s", what, detail)
	}
	t.Skipf("%s is missing (CI=true would fail): %s", what, detail)
}

// runClientTests runs the test runner of clients/NAME in that directory,
// with this test binary as its sluice (SLUICE_BIN; see TestMain), and
// fails with its output if it fails or takes more than four minutes.
func runClientTests(t *testing.T, name, bin string, args ...string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.Abs(filepath.Join(clientsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SLUICE_BIN="+self, runMainEnv+"=1", "PYTHONDONTWRITEBYTECODE=1", "NO_COLOR=1")
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == missingDependency:
		missing(t, name+"'s test dependencies", string(out))
	case err != nil:
		t.Fatalf("%s %v in %s: %v\n%s", bin, args, dir, err, out)
	}
	t.Logf("%s's tests passed in %v", name, time.Since(start).Round(time.Millisecond))
}
