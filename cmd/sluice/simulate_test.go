package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/simulate"
)

// simulateFiles writes a generated log (gzip), a rules file and a second
// rules file to a temporary directory.
func simulateFiles(t *testing.T) (log, rules, other string) {
	t.Helper()
	dir := t.TempDir()
	var gen bytes.Buffer
	if err := run(context.Background(), []string{"simulate", "-generate", "20000", "-seed", "3"}, &gen, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(gen.Bytes(), []byte("\n")); n != 20000 {
		t.Fatalf("-generate 20000 wrote %d lines", n)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(gen.Bytes())
	_ = zw.Close()
	log, rules, other = filepath.Join(dir, "access.log.gz"), filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "other.yaml")
	for name, text := range map[string]string{
		log:   z.String(),
		rules: "rules:\n  - name: web\n    limits: [\"4/min fixed\"]\n  - name: login\n    limits: [\"3/h fixed\"]\n",
		other: "rules:\n  - name: web\n    limits: [\"2/min fixed\"]\n  - name: login\n    limits: [\"3/h fixed\"]\n  - name: search\n    limits: [\"1/min\"]\n",
	} {
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return log, rules, other
}

// TestSimulateCommand runs sluice simulate on a generated gzip log: the
// JSON report, the HTML report and the comparison.
func TestSimulateCommand(t *testing.T) {
	log, rules, other := simulateFiles(t)
	html := filepath.Join(t.TempDir(), "report.html")
	var out, errs bytes.Buffer
	args := []string{"simulate", "-config", rules, "-rule", "web", "-rule", "login=/login", "-compare", other, "-json", "-html", html, log}
	if err := run(context.Background(), args, &out, &errs); err != nil {
		t.Fatalf("simulate: %v\n%s", err, errs.String())
	}
	if errs.Len() != 0 {
		t.Errorf("stderr not a terminal, yet %q was written to it", errs.String())
	}
	var rep simulate.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("-json: %v", err)
	}
	if rep.Requests != 20000 || len(rep.Rules) != 2 || rep.Compare == nil {
		t.Fatalf("report: %d requests, %d rules, compare %v; want 20000, 2, a comparison", rep.Requests, len(rep.Rules), rep.Compare != nil)
	}
	web := rep.Rules[0]
	if web.Rule != "web" || web.WouldDeny == 0 || web.WouldDeny >= web.Requests || len(web.TopDenied) == 0 || len(web.Series.Requests) == 0 || len(web.Rates) != 1 {
		t.Errorf("rule web: %+v; want some denials, top keys, a series and a rate distribution", web)
	}
	// 2/min denies all that 4/min denies in the same fixed windows, and
	// more: the diff is one-sided.
	var d simulate.RuleDiff
	for _, rd := range rep.Compare.Rules {
		if rd.Rule == "web" {
			d = rd
		}
	}
	if d.In != "both" || d.OnlyA != 0 || d.OnlyB == 0 || d.OnlyB != rep.Compare.Report.Rules[0].WouldDeny-web.WouldDeny {
		t.Errorf("compare web: %+v; want nothing denied by 4/min only, and by 2/min only the difference of their denials (%d - %d)", d, rep.Compare.Report.Rules[0].WouldDeny, web.WouldDeny)
	}

	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	charts, tables := 0, 1         // the summary
	for _, rr := range rep.Rules { // per rule: a chart, top keys if any, a table per limit
		charts++
		tables += min(len(rr.TopDenied), 1) + len(rr.Rates)
	}
	if n, m := bytes.Count(page, []byte("data-chart=")), bytes.Count(page, []byte("<table")); n != charts || m != tables {
		t.Errorf("the HTML report has %d charts and %d tables, want %d and %d", n, m, charts, tables)
	}
	// Self-contained: nothing to fetch.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=|url\(|@import`).Find(page); m != nil {
		t.Errorf("the HTML report refers to %q: it must fetch nothing", m)
	}

	out.Reset()
	if err := run(context.Background(), []string{"simulate", "-config", rules, "-compare", other, log}, &out, &errs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"20000 requests", "top keys denied by web", "compare: - denied by", "+ rule search: only in"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestSimulateBadInput checks the command's answers to bad logs and
// flags: counted, or a clear error, never a panic.
func TestSimulateBadInput(t *testing.T) {
	_, rules, _ := simulateFiles(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.log")
	good := `192.0.2.1 - - [05/Jan/2026:10:00:00 +0100] "GET / HTTP/1.1" 200 1 "-" "ua"`
	if err := os.WriteFile(bad, []byte(good+"\nnot a log line\n\x00\xff\n"+strings.Repeat("a", 100_000)+"\n"+good+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"simulate", "-config", rules, "-json", bad}, &out, &out); err != nil {
		t.Fatal(err)
	}
	var rep simulate.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 2 || rep.Malformed != 3 || len(rep.MalformedLines) != 3 || rep.MalformedLines[2].Line != 4 {
		t.Errorf("report: %d requests, %d malformed (%+v); want 2, 3, the last on line 4", rep.Requests, rep.Malformed, rep.MalformedLines)
	}
	// A gzip cut short: the report of what was read, and exit 1.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(strings.Repeat(good+"\n", 1000)))
	zw.Close()
	cut := filepath.Join(dir, "cut.log.gz")
	if err := os.WriteFile(cut, gz.Bytes()[:gz.Len()-12], 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err := run(context.Background(), []string{"simulate", "-config", rules, cut}, &out, &out)
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "ends early") || !strings.Contains(out.String(), "requests") {
		t.Errorf("simulate of a truncated gzip = %v (exit %d), output %q; want the report and exit 1 saying it ends early", err, exitCode(err), out.String())
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-config", rules, "-strict", bad}, "line 2"},
		{[]string{"-config", rules, "-rule", "nope", bad}, `unknown rule "nope"`},
		{[]string{"-config", rules, "-compare", rules, "-workers", "2", bad}, "one worker"},
		{[]string{bad}, "-config FILE is required"},
		{[]string{"-config", rules, "-format", "xml", bad}, "unknown log format"},
		{[]string{"-config", rules, "-format", "json", bad}, "-fields"},
		{[]string{"-config", rules, filepath.Join(dir, "missing.log")}, "no such file"},
		{[]string{"-config", rules, rules}, "unknown log format"}, // a YAML file is no log
	} {
		err := run(context.Background(), append([]string{"simulate"}, tt.args...), &out, &out)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("simulate %v = %v, want an error saying %q", tt.args, err, tt.want)
		}
	}
}
