package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestEveryMistakeAtOnce checks that one run reports every mistake of
// a file, of every kind, each on a line of its own with the file, line,
// column and field, in plain words with what to write instead, and
// nothing that follows from another (the rule whose limits are misspelt
// does not also "have no limits").
func TestEveryMistakeAtOnce(t *testing.T) {
	text := `store: {type: memroy}
listen: 127.0.0.1:80800
rules:
  - name: login
    limts: ["5/min"]
  - name: api
    limits: ["5/min leaky", "10/fortnight", "100/s burst -1", "1/s slidng"]
  - name: search
    limits: 10/s
  - name: api
    limits: ["1/s"]
failure:
  policy: opne
  timeout: 5 minutes
  rules: {serch: open}
guard:
  allow: [10.0.0.300]
  jails:
    - {name: j, rules: [logn], find_time: 10 mins, max_failures: lots}
forward_auth: {key: [ipp], deny_status: 418}
logins:
  - {name: web, jail: jali, delay: 1.5}
telemetry: {endpoint: collector}
admin: {token: short}
`
	want := []string{
		`t.yaml:1:15: store.type: unknown store type "memroy"; did you mean "memory"? (want memory, redis or memcached)`,
		`t.yaml:2:9: listen: port "80800" is not a number from 0 to 65535`,
		`t.yaml:5:5: rules[0]: unknown field "limts"; did you mean "limits"? (rules[0] takes name, limits, shadow, domain, descriptors, concurrency)`,
		`t.yaml:7:14: rules[1].limits[0]: limit "5/min leaky": unknown option "leaky" (want an algorithm: gcra, fixed, sliding, approx or log; or burst N, buckets N or staggered)`,
		`t.yaml:7:29: rules[1].limits[1]: limit "10/fortnight": period "fortnight" is not a unit (s, min, h, day, week) or a duration (5m, 1h30m, 2d)`,
		`t.yaml:7:45: rules[1].limits[2]: limit "100/s burst -1": burst "-1" is not a whole number ≥ 1`,
		`t.yaml:7:63: rules[1].limits[3]: limit "1/s slidng": unknown option "slidng" (want an algorithm: gcra, fixed, sliding, approx or log; or burst N, buckets N or staggered); did you mean "1/s sliding"?`,
		`t.yaml:9:13: rules[2].limits: want a list, not "10/s": write ["10/s"] for a list of one`,
		`t.yaml:10:11: rules[3].name: rule "api" is already defined at line 6`,
		`t.yaml:13:11: failure.policy: unknown policy "opne"; did you mean "open"? (want local, open or closed)`,
		`t.yaml:14:12: failure.timeout: "5 minutes" is not a duration: write a number and a unit (ns, us, ms, s, m, h) without a space, such as 300ms, 10m or 168h; did you mean "5m"?`,
		`t.yaml:15:18: failure.rules.serch: no rule or domain named "serch"; did you mean "search"?`,
		`t.yaml:17:11: guard.allow[0]: "10.0.0.300" is not an address (203.0.113.7), a network (198.51.100.0/24) or key:NAME`,
		`t.yaml:19:25: guard.jails[0].rules[0]: no rule named "logn"; did you mean "login"?`,
		`t.yaml:19:43: guard.jails[0].find_time: "10 mins" is not a duration: write a number and a unit (ns, us, ms, s, m, h) without a space, such as 300ms, 10m or 168h; did you mean "10m"?`,
		`t.yaml:19:66: guard.jails[0].max_failures: "lots" is not a whole number`,
		`t.yaml:20:22: forward_auth.key[0]: unknown key part "ipp"; did you mean "ip"? (want ip, method, path, uri, host or header:NAME)`,
		`t.yaml:20:41: forward_auth.deny_status: deny_status 418 must be 429 or 403 (for nginx's auth_request)`,
		`t.yaml:22:23: logins[0].jail: no jail named "jali" in guard.jails; did you mean "j"?`,
		`t.yaml:22:36: logins[0].delay: "1.5" is not a duration: write a number and a unit (ns, us, ms, s, m, h) without a space, such as 300ms, 10m or 168h`,
		`t.yaml:23:23: telemetry.endpoint: "collector" is not host:port, such as 127.0.0.1:8080: address collector: missing port in address`,
		`t.yaml:24:8: admin: the token is 5 bytes; at least 16 are required`,
	}
	_, err := Parse("t.yaml", []byte(text))
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("Parse = %v, want Errors", err)
	}
	got := strings.Split(err.Error(), "\n")
	if len(got) != len(es) {
		t.Errorf("%d lines for %d errors", len(got), len(es))
	}
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, g, w)
		}
	}
	if !errors.Is(err, sluice.ErrInvalidLimit) {
		t.Errorf("Parse error does not wrap ErrInvalidLimit: %v", err)
	}
}

// TestErrorText checks the form of an Error with and without its place.
func TestErrorText(t *testing.T) {
	boom := errors.New("boom")
	for _, tt := range []struct {
		e    *Error
		want string
	}{
		{&Error{File: "f.yaml", Line: 3, Column: 5, Path: "rules[0]", Err: boom}, "f.yaml:3:5: rules[0]: boom"},
		{&Error{File: "f.yaml", Line: 3, Err: boom}, "f.yaml:3: boom"},
		{&Error{File: "f.yaml", Err: boom}, "f.yaml: boom"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
		if !errors.Is(tt.e, boom) {
			t.Errorf("%v does not unwrap to its Err", tt.e)
		}
	}
	es := Errors{{File: "a", Err: boom}, {File: "b", Err: fs.ErrNotExist}}
	if es.Error() != "a: boom\nb: file does not exist" || !errors.Is(es, fs.ErrNotExist) {
		t.Errorf("Errors = %q, want a line each, unwrapping to each", es)
	}
}

// TestLoadErrors checks the errors of files that cannot be read, and
// of a directory of files with mistakes: every file's, in name order.
func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	_, err := Load(missing)
	if want := missing + ": cannot open it: no such file or directory"; err == nil || err.Error() != want || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want %q", err, want)
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnite, requests_per_unit: 1}\n")
	write("b.yaml", "domain: b\ndescriptors:\n  - key: k\n    ratelimit: {unit: second, requests_per_unit: 1}\n")
	_, err = Load(dir)
	want := filepath.Join(dir, "a.yaml") + `:4:24: descriptors[0].rate_limit.unit: invalid rate limit unit "fortnite" (want second, minute, hour, day, week, month or year)` + "\n" +
		filepath.Join(dir, "b.yaml") + `:4:5: descriptors[0]: unknown field "ratelimit"; did you mean "rate_limit"? (descriptors[0] takes key, value, rate_limit, limits, shadow_mode, shadow, quota_mode, detailed_metric, value_to_metric, share_threshold, metadata, descriptors)`
	if err == nil || err.Error() != want {
		t.Errorf("Load(dir) = %v\nwant %s", err, want)
	}
}

// TestShapeOddities checks the YAML a person may write that is not a
// plain mapping: merge keys, aliases (and many of them), null values, a
// key given twice, a top level that is no mapping.
func TestShapeOddities(t *testing.T) {
	c, err := Parse("m.yaml", []byte("base: &b {limits: [\"1/s\"]}\n"))
	if err == nil || !strings.Contains(err.Error(), `m.yaml:1:1: unknown field "base"`) {
		t.Errorf("an unknown top-level anchor: %v, %v", c, err)
	}
	c, err = Parse("m.yaml", []byte("rules:\n  - &r {name: a, limits: [\"1/s\"]}\n  - <<: *r\n    name: b\n"))
	if err != nil || len(c.Rules) != 2 || c.Rules[1].Name != "b" || c.Rules[1].Limits[0] != sluice.PerSecond(1) {
		t.Errorf("a merge key: %+v, %v; want rule b with a's limits", c, err)
	}
	_, err = Parse("m.yaml", []byte("rules:\n  - &r {name: a, limts: [\"1/s\"]}\n  - <<: *r\n    name: b\n"))
	if err == nil || !strings.Contains(err.Error(), `m.yaml:2:18: rules[0]: unknown field "limts"`) {
		t.Errorf("a misspelt field under an anchor: %v", err)
	}
	// A billion laughs: each level refers to the one before nine times.
	var b strings.Builder
	b.WriteString("a0: &a0 [\"x\"]\n")
	for i := 1; i < 10; i++ {
		b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := range 9 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	start := time.Now()
	if _, err := Parse("laughs.yaml", []byte(b.String())); err == nil {
		t.Error("a billion laughs parsed")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a billion laughs took %v", d)
	}
	c, err = Parse("n.yaml", []byte("store:\nlisten: ~\nrules:\n  - name: a\n    limits: [\"1/s\"]\n    shadow: null\n"))
	if err != nil || c.Listen != DefaultListen {
		t.Errorf("null values: %+v, %v; want the defaults", c, err)
	}
	c, err = Parse("d.yaml", []byte("rules:\n  - name: a\n    limits: [\"1/s\"]\n    name: b\n"))
	if err == nil || err.Error() != "d.yaml:4:5: rules[0].name: given twice; the first is at line 2" {
		t.Errorf("a key given twice: %v, %v; want only that error", c, err)
	}
	_, err = Parse("l.yaml", []byte("- 1\n- 2\n"))
	if err == nil || err.Error() != "l.yaml:1:1: want a mapping with the fields store, listen, tls, grpc, rules, failure, admin, guard, forward_auth, logins, telemetry, quota, not a list" {
		t.Errorf("a list at the top level: %v; want only that error", err)
	}
}

func TestDurationMeant(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		ok       bool
	}{
		{"5 minutes", "5m", true},
		{"10 mins", "10m", true},
		{"2 days", "48h", true},
		{"1.5 hours", "1h30m", true},
		{"90 seconds", "1m30s", true},
		{"2d", "48h", true},
		{"1 week", "168h", true},
		{"250 ms", "250ms", true},
		{"5 fortnights", "", false},
		{"soon", "", false},
		{"-5 minutes", "", false},
		{"5", "", false},
	} {
		got, ok := durationMeant(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("durationMeant(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestLimitHint(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"100/s slidng", `; did you mean "100/s sliding"?`},
		{"5/mintue", `; did you mean "5/min"?`},
		{"5/min brust 10", `; did you mean "5/min burst 10"?`},
		{"10/fortnight", ""},
		{"5/min leaky", ""},
	} {
		if got := limitHint(tt.in); got != tt.want {
			t.Errorf("limitHint(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
