package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigValidateDirectory checks that an envoyproxy/ratelimit
// config directory validates with its domains named, and that a
// directory with mistakes reports every file's.
func TestConfigValidateDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "edge.yaml"), "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 10}\n")
	writeFile(t, filepath.Join(dir, "mongo.yaml"), "domain: mongo_cps\ndescriptors:\n  - key: database\n    value: users\n    rate_limit: {unit: second, requests_per_unit: 500}\n  - key: database\n    value: default\n    rate_limit: {unit: second, requests_per_unit: 50}\n")
	out, _, err := runCmd(t, "config", "validate", dir)
	want := dir + ": ok: 2 domains, store memory, listen 127.0.0.1:8080\n" +
		"  domain edge       1 descriptors, from " + filepath.Join(dir, "edge.yaml") + ":1\n" +
		"  domain mongo_cps  2 descriptors, from " + filepath.Join(dir, "mongo.yaml") + ":1\n"
	if err != nil || out != want {
		t.Errorf("config validate DIR = %q, %v; want %q", out, err, want)
	}

	writeFile(t, filepath.Join(dir, "bad.yaml"), "domain: bad\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	writeFile(t, filepath.Join(dir, "worse.yaml"), "domain: worse\ndescriptors:\n  - key: k\n    ratelimit: {unit: second}\n")
	out, errOut, err := runCmd(t, "config", "validate", dir)
	var printed bytes.Buffer
	report(&printed, err)
	lines := strings.Split(strings.TrimSpace(printed.String()), "\n")
	if exitCode(err) != 1 || out != "" || errOut != "" || len(lines) != 2 ||
		!strings.HasPrefix(lines[0], filepath.Join(dir, "bad.yaml")+":4:24: descriptors[0].rate_limit.unit: invalid rate limit unit \"fortnight\"") ||
		!strings.HasPrefix(lines[1], filepath.Join(dir, "worse.yaml")+`:4:5: descriptors[0]: unknown field "ratelimit"; did you mean "rate_limit"?`) {
		t.Errorf("config validate of a directory with two bad files = %q, %q, exit %d, prints:\n%s\nwant only both files' errors, exit 1", out, errOut, exitCode(err), printed.String())
	}
}
