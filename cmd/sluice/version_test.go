package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestDescribeBuild(t *testing.T) {
	const build = "go1.26.8 linux/amd64"
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcdef0123456789"}, {Key: "vcs.time", Value: "2026-11-25T21:28:58Z"}}
	dirty := append(vcs[:2:2], debug.BuildSetting{Key: "vcs.modified", Value: "true"})
	for _, tt := range []struct {
		name     string
		module   string
		settings []debug.BuildSetting
		want     string
	}{
		{"go install …@v0.4.0", "v0.4.0", nil, "sluice v0.4.0 (go1.26.8 linux/amd64)"},
		{"built at a tag", "v0.4.0", vcs, "sluice v0.4.0 (commit 0123abcdef01 of 2026-11-25T21:28:58Z, go1.26.8 linux/amd64)"},
		{"built between tags, edited", "v0.4.1-0.20261125212858-0123abcdef01+dirty", dirty,
			"sluice v0.4.1-0.20261125212858-0123abcdef01+dirty (commit 0123abcdef01+dirty of 2026-11-25T21:28:58Z, go1.26.8 linux/amd64)"},
		{"go run", "(devel)", nil, "sluice (devel) (no version or commit recorded: built by go run, or with -buildvcs=false; go1.26.8 linux/amd64)"},
	} {
		if got := describeBuild(tt.module, tt.settings, build); got != tt.want {
			t.Errorf("%s: describeBuild = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestVersionInstalled installs sluice as a user does, go install
// github.com/sluicehq/sluice/cmd/sluice@v0.99.0, from a module proxy in a
// directory that serves this checkout's committed tree as that version,
// and runs sluice version. The module cache is the test's own, fed the
// dependencies from the shared one (a valid proxy), so that the made-up
// release never lands there. Its first run compiles everything with
// -trimpath (9 min at a load average of 14 on two cores); later runs
// find the build cache warm and take about 30 s, mostly the link.
func TestVersionInstalled(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this builds the command from a module proxy")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	gitCmd, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	shared, err := exec.Command(goCmd, "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const v = "v0.99.0"
	at := filepath.Join(dir, "proxy", "github.com", "sluicehq", "sluice", "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command(gitCmd, "archive", "--prefix=github.com/sluicehq/sluice@"+v+"/", "--format=zip",
		"-o", filepath.Join(at, v+".zip"), "HEAD", "--", ".", ":!bench")
	archive.Dir = "../.."
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive: %v\n%s", err, out)
	}
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(at, v+".mod"), string(mod))
	writeFile(t, filepath.Join(at, v+".info"), `{"Version":"`+v+`","Time":"2026-11-28T00:00:00Z"}`)
	writeFile(t, filepath.Join(at, "list"), v+"\n")

	// -trimpath keeps the build cache's entries independent of the module
	// cache's directory: the dependencies are compiled once, then reused.
	install := exec.Command(goCmd, "install", "-trimpath", "github.com/sluicehq/sluice/cmd/sluice@"+v)
	install.Dir = dir
	install.Env = append(os.Environ(), "GOBIN="+filepath.Join(dir, "bin"), "GOMODCACHE="+filepath.Join(dir, "modcache"),
		"GOFLAGS=-modcacherw", "GOSUMDB=off", "GOTOOLCHAIN=local",
		"GOPROXY=file://"+filepath.Join(dir, "proxy")+",file://"+filepath.Join(strings.TrimSpace(string(shared)), "cache", "download")+",off")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(dir, "bin", "sluice"), "version").Output()
	if want := "sluice " + v + " (go"; err != nil || !strings.HasPrefix(string(out), want) {
		t.Errorf("sluice version = %q, %v; want it to start %q", out, err, want)
	}
}
