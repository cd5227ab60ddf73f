package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, in string
		want     *Config
	}{
		{
			name: "full",
			in: `store: {type: memory}
listen: 127.0.0.1:9090
rules:
  - name: login
    limits: ["5/min", "20/h"]
  - name: api
    limits: ["100/s burst 200"]
`,
			want: &Config{
				Store:  Store{Type: StoreMemory},
				Listen: "127.0.0.1:9090",
				Rules: []NamedRule{
					{Name: "login", Limits: []sluice.Limit{sluice.PerMinute(5), sluice.PerHour(20)}},
					{Name: "api", Limits: []sluice.Limit{{Rate: 100, Period: time.Second, Burst: 200}}},
				},
			},
		},
		{
			name: "defaults",
			in:   "rules: [{name: a.b_c-1, limits: [\"1/s fixed staggered\"]}]\n",
			want: &Config{
				Store:  Store{Type: StoreMemory},
				Listen: DefaultListen,
				Rules: []NamedRule{{Name: "a.b_c-1", Limits: []sluice.Limit{
					{Rate: 1, Period: time.Second, Algorithm: sluice.FixedWindow, Staggered: true},
				}}},
			},
		},
		{
			name: "anchors and comments",
			in: `# shared limits
x: &l ["10/min sliding buckets 6"]
`,
			want: nil, // x is not a field: strict parsing rejects it
		},
		{
			name: "alias",
			in: `rules:
  - name: a
    limits: &l ["10/min sliding buckets 6"]
  - name: b
    limits: *l
listen: "[::1]:0"
`,
			want: &Config{
				Store:  Store{Type: StoreMemory},
				Listen: "[::1]:0",
				Rules: []NamedRule{
					{Name: "a", Limits: []sluice.Limit{{Rate: 10, Period: time.Minute, Algorithm: sluice.SlidingWindow, Buckets: 6}}},
					{Name: "b", Limits: []sluice.Limit{{Rate: 10, Period: time.Minute, Algorithm: sluice.SlidingWindow, Buckets: 6}}},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("t.yaml", []byte(tt.in))
			if tt.want == nil {
				if err == nil {
					t.Fatalf("Parse(%q) = %+v, want an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q) error = %v, want nil", tt.in, err)
			}
			// The service sections have tests of their own (service_test.go).
			got = &Config{Store: got.Store, Listen: got.Listen, Rules: got.Rules}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

// TestParseErrors checks that every kind of bad input is refused with an
// error naming the file, the line and what is wrong.
func TestParseErrors(t *testing.T) {
	const ok = "rules:\n  - name: a\n    limits: [\"5/min\"]\n"
	tests := []parseError{
		{"empty", "", []string{"f.yaml: empty configuration"}},
		{"only a comment", "# nothing\n", []string{"f.yaml: empty configuration"}},
		{"syntax", "rules: [\n", []string{"f.yaml:"}},
		{"not a mapping", "- 1\n", []string{"f.yaml:1:", "want a mapping"}},
		{"unknown top-level field", ok + "listn: x\n", []string{"f.yaml:4:", `unknown field "listn"; did you mean "listen"?`}},
		{"unknown rule field", "rules:\n  - name: a\n    limit: [\"5/min\"]\n", []string{"f.yaml:3:", `rules[0]: unknown field "limit"; did you mean "limits"?`}},
		{"unknown store field", "store: {type: memory, addr: x}\n" + ok, []string{"f.yaml:1:", `store: unknown field "addr" (store takes type, memory, redis, memcached)`}},
		{"duplicate key", "listen: a:1\nlisten: b:2\n" + ok, []string{"f.yaml:2:", "listen: given twice; the first is at line 1"}},
		{"store type", "store: {type: etcd}\n" + ok, []string{"f.yaml:1:15: store.type:", `unknown store type "etcd"`}},
		{"store not a mapping", "store: memory\n" + ok, []string{"f.yaml:1:8: store: want a mapping with the fields type, memory, redis, memcached, not \"memory\""}},
		{"listen without port", "listen: localhost\n" + ok, []string{"f.yaml:1:9: listen:", "not host:port"}},
		{"listen bad port", "listen: localhost:http2\n" + ok, []string{"f.yaml:1:9: listen:", `port "http2"`}},
		{"no rules", "listen: a:1\n", []string{"f.yaml:1:1: rules: no rules"}},
		{"empty rules", "rules: []\n", []string{"f.yaml:1:8: rules: no rules"}},
		{"rules not a list", "rules: {a: 1}\n", []string{"f.yaml:1:", "f.yaml:1:8: rules: want a list, not a mapping"}},
		{"rule not a mapping", "rules:\n  - 5\n", []string{"f.yaml:2:5: rules[0]: want a mapping with the fields name, limits"}},
		{"null rule", "rules:\n  -\n", []string{"f.yaml:2:3: rules: no rules"}},
		{"no name", "rules:\n  - limits: [\"5/min\"]\n", []string{"f.yaml:2:5: rules[0]: rule has no name"}},
		{"bad name", "rules:\n  - name: a b\n    limits: [\"5/min\"]\n", []string{"f.yaml:2:11: rules[0].name:", `"a b"`}},
		{"long name", "rules:\n  - name: " + strings.Repeat("x", 65) + "\n    limits: [\"5/min\"]\n", []string{"f.yaml:2:11: rules[0].name:"}},
		{"duplicate name", ok + "  - name: b\n    limits: [\"1/s\"]\n  - name: a\n    limits: [\"1/s\"]\n", []string{"f.yaml:6:11: rules[2].name:", `rule "a" is already defined at line 2`}},
		{"no limits", "rules:\n  - name: a\n", []string{"f.yaml:2:5: rules[0].limits:", `rule "a" has no limits`}},
		{"limits a scalar", "rules:\n  - name: a\n    limits: 5/min\n", []string{`f.yaml:3:13: rules[0].limits: want a list, not "5/min": write ["5/min"] for a list of one`}},
		{"bad limit", "rules:\n  - name: a\n    limits:\n      - 5/min\n      - 5/fortnight\n", []string{"f.yaml:5:9: rules[0].limits[1]:", `limit "5/fortnight": period "fortnight" is not a unit`}},
		{"zero rate", "rules:\n  - name: a\n    limits: [\"0/s\"]\n", []string{"f.yaml:3:14: rules[0].limits[0]:"}},
		{"shared state", "rules:\n  - name: a\n    limits: [\"5/min\", \"9/min burst 20\"]\n", []string{"f.yaml:3:13: rules[0].limits:", "share their state"}},
		{"two documents", ok + "---\nrules: []\n", []string{"f.yaml:4:1: only one YAML document"}},
		{"too large", strings.Repeat("#", MaxSize+1), []string{"f.yaml: larger than"}},
		{"telemetry without endpoint", ok + "telemetry: {traces: true}\n", []string{"f.yaml:4:12: telemetry:", "needs an endpoint"}},
		{"telemetry endpoint", ok + "telemetry: {endpoint: collector}\n", []string{"f.yaml:4:23: telemetry.endpoint:", "not host:port"}},
		{"telemetry ratio", ok + "telemetry: {endpoint: \"c:4318\", sample_ratio: 0}\n", []string{"f.yaml:4:47: telemetry.sample_ratio:", "not in (0, 1]"}},
		{"telemetry interval", ok + "telemetry: {endpoint: \"c:4318\", interval: 10ms}\n", []string{"f.yaml:4:43: telemetry.interval:", "a second or more"}},
	}
	checkParseErrors(t, "f.yaml", "", tests)
}

// TestParseTelemetry checks the telemetry section's defaults and fields.
func TestParseTelemetry(t *testing.T) {
	const ok = "rules:\n  - name: a\n    limits: [\"5/min\"]\n"
	for _, tt := range []struct {
		in   string
		want Telemetry
	}{
		{"", Telemetry{}},
		{"telemetry: {endpoint: \"127.0.0.1:4318\"}\n", Telemetry{Endpoint: "127.0.0.1:4318", Traces: true, Metrics: true, SampleRatio: 1, Interval: DefaultTelemetryInterval}},
		{"telemetry: {endpoint: \"c:4318\", insecure: true, traces: false, sample_ratio: 0.01, interval: 5s}\n", Telemetry{Endpoint: "c:4318", Insecure: true, Metrics: true, SampleRatio: 0.01, Interval: 5 * time.Second}},
	} {
		c, err := Parse("t.yaml", []byte(ok+tt.in))
		if err != nil || c.Telemetry != tt.want {
			t.Errorf("Parse(%q): %+v, %v; want %+v", tt.in, c.Telemetry, err, tt.want)
		}
	}
}

func TestDefault(t *testing.T) {
	c, err := Default()
	if err != nil {
		t.Fatalf("Default() error = %v", err)
	}
	if c.Store.Type != StoreMemory || c.Listen != DefaultListen {
		t.Errorf("Default() store, listen = %q, %q; want %q, %q", c.Store.Type, c.Listen, StoreMemory, DefaultListen)
	}
	for _, name := range []string{"login", "api"} {
		if _, ok := c.Rule(name); !ok {
			t.Errorf("Default().Rule(%q) not found", name)
		}
	}
	if _, ok := c.Rule("nope"); ok {
		t.Errorf("Default().Rule(%q) found, want none", "nope")
	}
	if got, want := string(Sample()), string(sample); got != want {
		t.Errorf("Sample() = %q, want the embedded file", got)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(path, Sample(), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatalf("Load(%q) error = %v", path, err)
	}
	want, _ := Default()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load(sample) = %+v, want %+v", got, want)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("rules:\n  - name: x\n    limits: [\"1/eon\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); !errors.Is(err, sluice.ErrInvalidLimit) || !strings.HasPrefix(err.Error(), bad+":3:14: rules[0].limits[0]:") {
		t.Errorf("Load(%q) error = %v, want ErrInvalidLimit starting with %q", bad, err, bad+":3:14: rules[0].limits[0]:")
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) error = %v, want a not-exist error", err)
	}
}

// FuzzParse checks that no input makes Parse panic, and that whatever it
// accepts is a configuration a server can apply.
func FuzzParse(f *testing.F) {
	f.Add(Sample())
	f.Add([]byte("rules: [{name: a, limits: [\"5/min\", \"20/h\"]}]"))
	f.Add([]byte("rules:\n  - name: a\n    limits: &x [\"1/s\"]\n  - name: b\n    limits: *x\n"))
	f.Add([]byte("rules:\n  - &r {name: a, limts: [\"1/s\"]}\n  - <<: *r\n    name: b\nfailure: {timeout: 5 minutes}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("Parse error = %q, want Errors", err)
			}
			for line := range strings.SplitSeq(err.Error(), "\n") {
				if !strings.HasPrefix(line, "fuzz.yaml") || strings.Contains(line, "config.") {
					t.Fatalf("Parse error line %q: want it to name the file, and no internal type", line)
				}
			}
			return
		}
		if len(c.Rules)+len(c.Domains) == 0 || c.Store.Type != StoreMemory || c.Listen == "" {
			t.Fatalf("Parse accepted %+v", c)
		}
		names := map[string]bool{}
		for _, r := range c.Rules {
			if names[r.Name] || !ruleName.MatchString(r.Name) {
				t.Fatalf("Parse accepted rule name %q (duplicate or malformed)", r.Name)
			}
			names[r.Name] = true
			req := sluice.Request{Limits: r.Limits, Op: sluice.OpReset}
			if err := req.Validate(); err != nil {
				t.Fatalf("Parse accepted rule %q whose policy is invalid: %v", r.Name, err)
			}
		}
	})
}

// A parseError is a configuration Parse must reject with an error that
// contains each of want.
type parseError struct {
	name, in string
	want     []string // substrings of the error
}

// checkParseErrors parses prefix+in of each case as file and checks that
// it fails with every wanted substring, naming no internal type.
func checkParseErrors(t *testing.T, file, prefix string, tests []parseError) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := prefix + tt.in
			c, err := Parse(file, []byte(in))
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want an error", in, c)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse(%q) error = %q, want it to contain %q", in, err, w)
				}
			}
			if strings.Contains(err.Error(), "config.") {
				t.Errorf("Parse(%q) error = %q names an internal type", in, err)
			}
		})
	}
}

// TestParseReportsEveryError checks that one parse reports a mistake in
// each rule and section at fault, not only the first, and nothing for a
// section that only names a rule at fault.
func TestParseReportsEveryError(t *testing.T) {
	text := `rules:
  - name: a
    limits: ["5/foo"]
  - name: b
    limits: ["x"]
  - name: c
    limits: ["1/s"]
listen: "nowhere"
guard:
  jails:
    - {name: j, rules: [a], max_failures: 3, find_time: 1m, ban_time: 1m}
forward_auth: {rule: nope}
`
	_, err := Parse("t.yaml", []byte(text))
	if err == nil {
		t.Fatal("Parse accepted three mistakes")
	}
	for _, want := range []string{"t.yaml:3:14: rules[0].limits[0]", "t.yaml:5:14: rules[1].limits[0]", "t.yaml:8:9: listen", "forward_auth.rule"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not report %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "guard") {
		t.Errorf("error blames the jail for naming rule a, which is at fault itself:\n%v", err)
	}
}

// TestValidateSecrets checks that Validate warns of a secret's unset
// variable where Load fails, and still reports the other errors.
func TestValidateSecrets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.yaml")
	text := "rules:\n  - name: a\n    limits: [\"1/s\"]\nadmin:\n  token_env: SLUICE_TEST_UNSET_TOKEN\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "SLUICE_TEST_UNSET_TOKEN is not set") {
		t.Errorf("Load = %v, want the unset variable as an error", err)
	}
	c, warnings, err := Validate(path)
	if err != nil || c == nil || len(warnings) != 1 || !strings.Contains(warnings[0], "s.yaml:5:14: admin.token_env") {
		t.Errorf("Validate = %v, %q, %v; want the configuration and one warning naming line 5", c, warnings, err)
	}
	if err := os.WriteFile(path, []byte(text+"listen: nowhere\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, warnings, err := Validate(path); err == nil || len(warnings) != 1 {
		t.Errorf("Validate of a file with an error too = %q, %v; want the warning and the error", warnings, err)
	}
}
