package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestLoadEnvoyGood loads envoyproxy/ratelimit's own example and test
// configurations unchanged.
func TestLoadEnvoyGood(t *testing.T) {
	files, err := filepath.Glob("testdata/envoy/good/*.yaml")
	if err != nil || len(files) < 6 {
		t.Fatalf("Glob = %v, %v; want the 6 copied files", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := Load(f)
			if err != nil {
				t.Fatalf("Load(%q) error = %v", f, err)
			}
			if len(c.Domains) != 1 || len(c.Rules) != 0 || c.Store.Type != StoreMemory || c.Listen != DefaultListen {
				t.Errorf("Load(%q) = %d domains, %d rules, store %q, listen %q; want 1, 0, memory, default", f, len(c.Domains), len(c.Rules), c.Store.Type, c.Listen)
			}
		})
	}
}

// find returns the node at the path of key/value pairs, or nil.
func find(ds []Descriptor, path ...string) *Descriptor {
	for i := range ds {
		if ds[i].Key == path[0] && ds[i].Value == path[1] {
			if len(path) == 2 {
				return &ds[i]
			}
			return find(ds[i].Descriptors, path[2:]...)
		}
	}
	return nil
}

// TestLoadEnvoyExample checks how example.yaml's fields are read: units,
// replaces, names, requests_per_unit 0, shadow, unlimited, quota.
func TestLoadEnvoyExample(t *testing.T) {
	c, err := Load("testdata/envoy/good/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d, ok := c.Domain("rl")
	if !ok || d.Source != "testdata/envoy/good/example.yaml:2" {
		t.Fatalf(`Domain("rl") = %+v, %v; want it, from line 2`, d, ok)
	}
	perMin := func(n int) []sluice.Limit {
		return []sluice.Limit{{Rate: n, Period: time.Minute, Algorithm: sluice.FixedWindow}}
	}
	tests := []struct {
		path []string
		want RateLimit
		flag func(*Descriptor) bool
	}{
		{[]string{"category", "account"}, RateLimit{Limits: perMin(4), Replaces: []string{"bkthomps", "fake_name"}}, nil},
		{[]string{"source_cluster", "proxy", "destination_cluster", "fake"}, RateLimit{Name: "fake_name", Limits: perMin(2)}, nil},
		{[]string{"foo", "", "bar", "banned"}, RateLimit{Name: "banned_limit", Deny: true, Limits: []sluice.Limit{{Period: time.Minute, Algorithm: sluice.FixedWindow}}}, nil},
		{[]string{"foo", "", "baz", ""}, RateLimit{Limits: []sluice.Limit{{Rate: 1, Period: time.Second, Algorithm: sluice.FixedWindow}}}, nil},
		{[]string{"foo", "", "baz", "shady"}, RateLimit{Limits: perMin(3)}, func(d *Descriptor) bool { return d.Shadow }},
		{[]string{"foo", "", "bay", ""}, RateLimit{Unlimited: true}, nil},
		{[]string{"unspec", ""}, RateLimit{Limits: perMin(2)}, func(d *Descriptor) bool { return d.DetailedMetric }},
		{[]string{"service", "service_2"}, RateLimit{Limits: perMin(2)}, func(d *Descriptor) bool { return d.Quota }},
	}
	for _, tt := range tests {
		n := find(d.Descriptors, tt.path...)
		if n == nil || n.RateLimit == nil {
			t.Errorf("node %v = %+v, want one with a rate limit", tt.path, n)
			continue
		}
		if !reflect.DeepEqual(*n.RateLimit, tt.want) {
			t.Errorf("node %v rate limit = %+v, want %+v", tt.path, *n.RateLimit, tt.want)
		}
		if tt.flag != nil && !tt.flag(n) {
			t.Errorf("node %v = %+v, want its flag set", tt.path, n)
		}
	}
	if n := find(d.Descriptors, "source_cluster", "proxy"); n == nil || n.RateLimit != nil || len(n.Descriptors) != 4 {
		t.Errorf("node source_cluster=proxy = %+v, want a placeholder with 4 children", n)
	}
}

// TestLoadEnvoyBad checks that the files envoyproxy/ratelimit refuses are
// refused, with the file, and the line where the fault has one.
func TestLoadEnvoyBad(t *testing.T) {
	tests := map[string][]string{
		"bad_limit_unit.yaml":      {":6:13: descriptors[0].rate_limit.unit:", `invalid rate limit unit "foo"`},
		"bad_yaml.yaml":            {"bad_yaml.yaml:"},
		"duplicate_key.yaml":       {":6:10: descriptors[1].key:", `duplicate descriptor "test-domain.key1_value1" (already at line 3)`},
		"empty_domain.yaml":        {"empty_domain.yaml:1:1: ", `unknown field "descriptors"`},
		"empty_key.yaml":           {":3:5: descriptors[0]:", "empty key"},
		"misspelled_key.yaml":      {":5:5: descriptors[0]:", `unknown field "ratelimit"; did you mean "rate_limit"?`},
		"misspelled_key2.yaml":     {":7:7: descriptors[0].rate_limit:", `unknown field "requestsperunit"; did you mean "requests_per_unit"?`},
		"non_map_list.yaml":        {":3:5: descriptors[0]: want a mapping with the fields key, value, rate_limit"},
		"non_string_key.yaml":      {"non_string_key.yaml:1:1: ", `unknown field "0.25"`},
		"replaces_empty.yaml":      {":10:15: descriptors[0].descriptors[0].rate_limit.replaces[0]:", "no name"},
		"replaces_self.yaml":       {":10:15: descriptors[0].descriptors[0].rate_limit.replaces[0]:", `cannot replace itself ("self")`},
		"unlimited_with_unit.yaml": {":5:7: descriptors[0].rate_limit:", "unlimited rate_limit takes no unit"},
	}
	files, _ := filepath.Glob("testdata/envoy/bad/*.yaml")
	if len(files) != len(tests) {
		t.Errorf("testdata/envoy/bad has %d files, want %d", len(files), len(tests))
	}
	for _, f := range files {
		c, err := Load(f)
		if err == nil {
			t.Errorf("Load(%q) = %+v, want an error", f, c)
			continue
		}
		want, ok := tests[filepath.Base(f)]
		if !ok {
			t.Errorf("no expectation for %s (error %v)", f, err)
			continue
		}
		for _, w := range append(want, f) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Load(%q) error = %q, want it to contain %q", f, err, w)
			}
		}
		if strings.Contains(err.Error(), "config.") {
			t.Errorf("Load(%q) error = %q names an internal type", f, err)
		}
	}
}

// TestParseDomainRules checks domains in sluice's own files: sluice
// limits on descriptors, Envoy's rate_limit blocks, both in one file.
func TestParseDomainRules(t *testing.T) {
	c, err := Parse("s.yaml", []byte(`rules:
  - name: login
    limits: ["5/min"]
    shadow: true
  - domain: edge
    descriptors:
      - key: remote_address
        limits: ["30/5m sliding"]
      - key: path
        value: /login
        descriptors:
          - key: remote_address
            rate_limit: {limits: ["5/min", "20/h"], name: login_ip, replaces: [{name: x}]}
            shadow: true
      - key: path
        value: "/static/*"
        share_threshold: true
        rate_limit: {unit: second, requests_per_unit: 1000}
      - key: health
        rate_limit: {unlimited: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Descriptor{
		{Key: "remote_address", Line: 7, RateLimit: &RateLimit{Limits: []sluice.Limit{{Rate: 30, Period: 5 * time.Minute, Algorithm: sluice.SlidingWindow}}}},
		{Key: "path", Value: "/login", Line: 9, Descriptors: []Descriptor{
			{Key: "remote_address", Line: 12, Shadow: true, RateLimit: &RateLimit{Name: "login_ip", Replaces: []string{"x"}, Limits: []sluice.Limit{sluice.PerMinute(5), sluice.PerHour(20)}}},
		}},
		{Key: "path", Value: "/static/*", Line: 15, ShareThreshold: true, RateLimit: &RateLimit{Limits: []sluice.Limit{{Rate: 1000, Period: time.Second, Algorithm: sluice.FixedWindow}}}},
		{Key: "health", Line: 19, RateLimit: &RateLimit{Unlimited: true}},
	}
	if len(c.Rules) != 1 || !c.Rules[0].Shadow || len(c.Domains) != 1 {
		t.Fatalf("Parse = rules %+v, domains %+v; want 1 shadow rule, 1 domain", c.Rules, c.Domains)
	}
	for i := range want {
		// Descriptors are compared without their empty child lists.
		if got := c.Domains[0].Descriptors[i]; !reflect.DeepEqual(normal(got), normal(want[i])) {
			t.Errorf("descriptor %d = %+v, want %+v", i, got, want[i])
		}
	}
	if c.Domains[0].Source != "s.yaml:5" {
		t.Errorf("Source = %q, want s.yaml:5", c.Domains[0].Source)
	}
}

// normal makes empty child lists nil, for comparison.
func normal(d Descriptor) Descriptor {
	if len(d.Descriptors) == 0 {
		d.Descriptors = nil
	}
	for i := range d.Descriptors {
		d.Descriptors[i] = normal(d.Descriptors[i])
	}
	return d
}

func TestParseDomainErrors(t *testing.T) {
	tests := []parseError{
		{"name and domain", "rules:\n  - name: a\n    domain: b\n", []string{"f.yaml:2:5: rules[0]:", "not both"}},
		{"domain and limits", "rules:\n  - domain: b\n    limits: [\"1/s\"]\n    descriptors: [{key: k}]\n", []string{"f.yaml:2:13: rules[0].domain:", "limits and shadow go on each descriptor"}},
		{"domain without descriptors", "rules:\n  - domain: b\n", []string{"f.yaml:2:5: rules[0].descriptors:", "no descriptors"}},
		{"rule with descriptors", "rules:\n  - name: b\n    descriptors: [{key: k}]\n", []string{"f.yaml:3:18: rules[0].descriptors:", "name a domain instead"}},
		{"domain named like a rule", "rules:\n  - name: a\n    limits: [\"1/s\"]\n  - domain: a\n    descriptors: [{key: k}]\n", []string{"f.yaml:4:13: rules[1].domain:", `domain "a" is already defined at line 2`}},
		{"bad domain name", "rules:\n  - domain: a b\n    descriptors: [{key: k}]\n", []string{"f.yaml:2:13: rules[0].domain:"}},
		{"limits and rate_limit", "rules:\n  - domain: d\n    descriptors:\n      - key: k\n        limits: [\"1/s\"]\n        rate_limit: {unit: second, requests_per_unit: 1}\n", []string{"f.yaml:5:17: rules[0].descriptors[0].limits:", "both limits and rate_limit"}},
		{"bad sluice limit", "rules:\n  - domain: d\n    descriptors:\n      - key: k\n        limits: [\"1/s\", \"2/eon\"]\n", []string{"f.yaml:5:25: rules[0].descriptors[0].limits[1]:", `period "eon" is not a unit`}},
		{"limits and unit", "rules:\n  - domain: d\n    descriptors:\n      - key: k\n        rate_limit: {limits: [\"1/s\"], unit: second}\n", []string{"rules[0].descriptors[0].rate_limit.limits:", "both limits and unit"}},
		{"share without wildcard", "rules:\n  - domain: d\n    descriptors:\n      - key: k\n        value: v\n        share_threshold: true\n", []string{"f.yaml:6:26: rules[0].descriptors[0].share_threshold:", "needs a wildcard"}},
		{"impossible rate", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 4000000000}\n", []string{"f.yaml:4:51: descriptors[0].rate_limit.requests_per_unit:", "more than one event per nanosecond"}},
		{"negative rate", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n", []string{`f.yaml:4:51: descriptors[0].rate_limit.requests_per_unit: "-1" is not a whole number from 0 to 4294967295`}},
		{"envoy without domain value", "domain: \"\"\ndescriptors: []\n", []string{"f.yaml:1:9: domain:", "needs a domain"}},
		{"envoy with sluice settings", "domain: d\nlisten: a:1\n", []string{"f.yaml:2:", `unknown field "listen" (the top level takes domain, descriptors)`}},
		{"too deep", "domain: d\ndescriptors:\n" + deep(40), []string{"nested deeper than 32 levels"}},
	}
	checkParseErrors(t, "f.yaml", "", tests)
}

// deep returns descriptors nested n levels deep.
func deep(n int) string {
	var b strings.Builder
	for i := range n {
		ind := strings.Repeat("  ", 2*i+1)
		b.WriteString(ind + "- key: k\n" + ind + "  descriptors:\n")
	}
	b.WriteString(strings.Repeat("  ", 2*n+1) + "- key: leaf\n")
	return b.String()
}

// TestLoadDir reads a directory as envoyproxy/ratelimit does: Envoy files
// add domains, one sluice file gives the settings.
func TestLoadDir(t *testing.T) {
	write := func(t *testing.T, dir, name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	envoyA := "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"
	envoyB := "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 5}\n"
	sluiceFile := "listen: 127.0.0.1:9999\nrules:\n  - name: login\n    limits: [\"5/min\"]\n"

	dir := t.TempDir()
	write(t, dir, "a.yaml", envoyA)
	write(t, dir, "b.yml", envoyB)
	write(t, dir, "notes.txt", "not yaml: ignored")
	write(t, dir, ".hidden.yaml", "garbage: [")
	c, err := Load(dir)
	if err != nil {
		t.Fatalf("Load(dir) error = %v", err)
	}
	if len(c.Domains) != 2 || c.Domains[0].Name != "a" || c.Domains[1].Name != "b" || c.Listen != DefaultListen {
		t.Errorf("Load(envoy dir) = domains %+v, listen %q; want a, b and the default listen", c.Domains, c.Listen)
	}

	write(t, dir, "sluice.yaml", sluiceFile)
	if c, err = Load(dir); err != nil {
		t.Fatalf("Load(dir with sluice.yaml) error = %v", err)
	}
	if len(c.Domains) != 2 || len(c.Rules) != 1 || c.Listen != "127.0.0.1:9999" {
		t.Errorf("Load(dir with sluice.yaml) = %d domains, %d rules, listen %q; want 2, 1, 127.0.0.1:9999", len(c.Domains), len(c.Rules), c.Listen)
	}

	// A settings file without rules: the Envoy files have them.
	write(t, dir, "sluice.yaml", "listen: 127.0.0.1:9998\n")
	if c, err = Load(dir); err != nil || c.Listen != "127.0.0.1:9998" || len(c.Rules) != 0 || len(c.Domains) != 2 {
		t.Errorf("Load(dir with a settings file) = %+v, %v; want its listen and the 2 domains", c, err)
	}
	empty := t.TempDir()
	write(t, empty, "sluice.yaml", "listen: 127.0.0.1:9998\n")
	if c, err := Load(empty); err == nil || !strings.Contains(err.Error(), "no rules") {
		t.Errorf("Load(dir of settings only) = %v, %v; want a no-rules error", c, err)
	}
	write(t, dir, "sluice.yaml", sluiceFile)

	errs := []struct {
		name, file, data, want string
	}{
		{"duplicate domain", "c.yaml", envoyA, `c.yaml:1: domain "a" is already defined (` + filepath.Join(dir, "a.yaml") + ":1)"},
		{"domain named like a rule", "c.yaml", "domain: login\ndescriptors: []\n", `domain "login" is already defined (a rule)`},
		{"two sluice files", "t.yaml", sluiceFile, "a second sluice configuration"},
		{"a bad file", "c.yaml", "domain: c\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n", "c.yaml:4:24: descriptors[0].rate_limit.unit:"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			write(t, dir, tt.file, tt.data)
			defer os.Remove(filepath.Join(dir, tt.file))
			if c, err := Load(dir); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load(dir) = %v, %v; want an error containing %q", c, err, tt.want)
			}
		})
	}
	if c, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no *.yaml") {
		t.Errorf("Load(empty dir) = %v, %v; want an error", c, err)
	}
}
