package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeReload edits the configuration of a running "sluice serve":
// a change of the file and a SIGHUP each put the new rules in force,
// counters kept; a broken file is rejected and the old rules keep
// serving.
func TestServeReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	write := func(text string) {
		t.Helper()
		// Write a new file and rename it over the old, as editors and
		// deployment tools do, so the server never reads half a file.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	const v1 = "rules:\n  - name: web\n    limits: [\"3/h\"]\n"
	write(v1)
	url := startServe(t, "-config", path)
	check := func(rule string) string {
		t.Helper()
		out, _, _ := runCmd(t, "check", "-server", url, rule, "k")
		return out
	}
	// waitFor asks until rule answers with prefix, for at most 10s.
	waitFor := func(rule, prefix string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			out := check(rule)
			if strings.HasPrefix(out, prefix) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("check %s = %q, want prefix %q within 10s", rule, out, prefix)
			}
			time.Sleep(50 * time.Millisecond) // waiting for the watcher
		}
	}
	if out := check("web"); !strings.HasPrefix(out, "allowed: web k: 2 of 3/h left") {
		t.Fatalf("check web = %q", out)
	}

	// A broken file is rejected: web still serves, nothing new appears.
	write("rules: [\n")
	write(v1 + "  - name: broken\n    limits: [\"5/fortnight\"]\n")
	if out := check("web"); !strings.HasPrefix(out, "allowed: web k: 1 of 3/h left") {
		t.Errorf("check web after broken files = %q, want the old rules with their counter", out)
	}

	// A good file adds a rule; web keeps its counter.
	write(v1 + "  - name: extra\n    limits: [\"1/h\"]\n")
	waitFor("extra", "allowed: extra k: 0 of 1/h left")
	if out := check("web"); !strings.HasPrefix(out, "allowed: web k: 0 of 3/h left") {
		t.Errorf("check web after reload = %q, want its 3rd request allowed, the last", out)
	}
	if out := check("web"); !strings.HasPrefix(out, "denied: web k: 0 of 3/h left") {
		t.Errorf("check web after reload = %q, want its 4th request denied", out)
	}

	// SIGHUP reloads too (with the watcher off, only it can).
	url2 := startServe(t, "-config", path, "-watch=false")
	write(v1 + "  - name: third\n    limits: [\"1/h\"]\n")
	if out, _, _ := runCmd(t, "check", "-server", url2, "third", "k"); strings.HasPrefix(out, "allowed") {
		t.Fatalf("check third before SIGHUP = %q, want unknown", out)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _, _ := runCmd(t, "check", "-server", url2, "third", "k")
		if strings.HasPrefix(out, "allowed: third k: 0 of 1/h left") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("check third after SIGHUP = %q", out)
		}
		time.Sleep(50 * time.Millisecond) // waiting for the signal to be handled
	}
}
