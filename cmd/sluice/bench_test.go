package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// startServeGRPC runs "sluice serve" on an envoyproxy/ratelimit config
// directory (domain edge: 50 per hour per remote_address) with Envoy's
// gRPC API on, and returns the HTTP and gRPC addresses.
func startServeGRPC(t *testing.T) (httpURL, grpcAddr string) {
	t.Helper()
	dir := t.TempDir()
	cfg := "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: hour, requests_per_unit: 50}\n"
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	got, _ := serve(t, []string{"-config", dir, "-listen", "127.0.0.1:0", "-grpc-listen", "127.0.0.1:0", "-watch=false"},
		"sluice: listening on ", "sluice: grpc on ")
	return got[0], got[1]
}

// TestBench serves an envoyproxy/ratelimit config directory over gRPC and
// HTTP and loads it with "sluice bench".
func TestBench(t *testing.T) {
	httpURL, grpcAddr := startServeGRPC(t)

	out, errOut, err := runCmd(t, "bench", "-server", "grpc://"+grpcAddr, "-domain", "edge", "-descriptor", "remote_address={key}", "-n", "200", "-c", "4", "-conns", "2")
	if err != nil {
		t.Fatalf("bench grpc: %v; stderr %s", err, errOut)
	}
	for _, want := range []string{"requests   200 in", "verdicts   50 allowed (25.0%), 150 over the limit (75.0%), 0 errors", "p50 ", "p999 ", "histogram", "#"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench grpc output lacks %q:\n%s", want, out)
		}
	}

	out, errOut, err = runCmd(t, "bench", "-json", "-quiet", "-server", httpURL, "-domain", "edge", "-descriptor", "remote_address=h{key}", "-keys", "4", "-n", "100")
	if err != nil {
		t.Fatalf("bench http: %v; stderr %s", err, errOut)
	}
	var r benchReport
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Requests != 100 || r.Allowed != 100 || r.Errors != 0 || r.P99 <= 0 || errOut != "" {
		t.Errorf("bench -json http = %+v (%v), stderr %q; want 100 allowed, no progress", r, err, errOut)
	}

	// envoyproxy/ratelimit's /json, which serve answers too: 50 of 60
	// allowed on a fresh address, the rest answered 429.
	out, errOut, err = runCmd(t, "bench", "-json", "-quiet", "-server", httpURL+"/json", "-domain", "edge", "-descriptor", "remote_address=j{key}", "-n", "60", "-c", "4")
	if err != nil {
		t.Fatalf("bench /json: %v; stderr %s", err, errOut)
	}
	r = benchReport{}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Requests != 60 || r.Allowed != 50 || r.OverLimit != 10 || r.Errors != 0 {
		t.Errorf("bench -json /json = %+v (%v); want 60 requests, 50 allowed, 10 over the limit", r, err)
	}

	for _, tt := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"bench", "-domain", "edge", "-descriptor", "a=b"}, "-server is required", 2},
		{[]string{"bench", "-server", "grpc://192.0.2.1:8081", "-domain", "edge", "-descriptor", "a=b"}, "not a loopback address", 1},
		{[]string{"bench", "-server", "grpc://" + grpcAddr, "-rule", "x"}, "needs a domain", 1},
		{[]string{"bench", "-server", httpURL, "-rule", "nope", "-n", "3", "-quiet"}, "every request failed", 1},
	} {
		_, _, err := runCmd(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) || exitCode(err) != tt.code {
			t.Errorf("sluice %v = %v (exit %d), want exit %d with %q", tt.args, err, exitCode(err), tt.code, tt.want)
		}
	}
}

// atoiOf returns the number the first group of pattern matches in s.
func atoiOf(t *testing.T, s, pattern string) int {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no %q in:\n%s", pattern, s)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestBenchRate runs "sluice bench -rate" against a real "sluice serve":
// the schedule sets exactly how many requests are sent, and the report
// says how they kept to it.
func TestBenchRate(t *testing.T) {
	httpURL, grpcAddr := startServeGRPC(t)

	out, errOut, err := runCmd(t, "bench", "-server", "grpc://"+grpcAddr, "-domain", "edge", "-descriptor", "remote_address={key}",
		"-rate", "200", "-d", "1s", "-c", "8", "-conns", "2")
	if err != nil {
		t.Fatalf("bench -rate grpc: %v; stderr %s", err, errOut)
	}
	for _, want := range []string{
		"(8 at most in flight over 2 connections, 1 keys)",
		"schedule   200/s offered, 200 requests: ",
		"p99 ", "(from each request's intended send time)", "send lag   p50 ", "histogram",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("bench -rate grpc output lacks %q:\n%s", want, out)
		}
	}
	// How many a busy machine misses is its business, not the test's
	// (no bound on time): every request is answered or missed, and the
	// limit of 50 decides the verdicts of those answered.
	missed, answered, allowed, over := atoiOf(t, out, `(\d+) missed`), atoiOf(t, out, `requests\s+(\d+) in`),
		atoiOf(t, out, `verdicts\s+(\d+) allowed`), atoiOf(t, out, `(\d+) over the limit`)
	if answered+missed != 200 || answered == 0 || allowed > 50 || allowed < 50-missed || allowed+over != answered || !strings.Contains(out, " 0 errors") {
		t.Errorf("bench -rate grpc: %d answered, %d missed, %d allowed, %d over; want 200 answered or missed, 50 allowed of those answered, no errors:\n%s", answered, missed, allowed, over, out)
	}

	out, errOut, err = runCmd(t, "bench", "-json", "-quiet", "-server", httpURL, "-domain", "edge", "-descriptor", "remote_address=r{key}",
		"-keys", "10", "-rate", "500", "-n", "100")
	if err != nil {
		t.Fatalf("bench -rate -json http: %v; stderr %s", err, errOut)
	}
	var r benchReport
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Schedule == nil {
		t.Fatalf("bench -rate -json http = %q (%v), want a report with a schedule", out, err)
	}
	if s := r.Schedule; r.Requests+s.Missed != 100 || r.Requests == 0 || r.Allowed != r.Requests || r.Errors != 0 || s.OfferedRate != 500 || s.Scheduled != 100 || r.P99 <= 0 || s.LagMax < s.LagP50 {
		t.Errorf("bench -rate -json http = %+v, schedule %+v; want the 100 scheduled at 500/s answered (allowed) or missed", r, *s)
	}
	// A closed loop has no schedule.
	out, _, err = runCmd(t, "bench", "-json", "-quiet", "-server", httpURL, "-domain", "edge", "-descriptor", "remote_address=c{key}", "-n", "5")
	if err != nil || strings.Contains(out, "schedule") {
		t.Errorf("bench -json (closed loop) = %q, %v; want no schedule", out, err)
	}

	for _, tt := range []struct {
		rate, want string
	}{
		{"-5", "must not be negative"},
		{"2e6", "want at most 1000000 per second"},
		{"fast", "invalid value"},
	} {
		_, _, err := runCmd(t, "bench", "-server", "grpc://"+grpcAddr, "-domain", "edge", "-descriptor", "a=b", "-rate", tt.rate)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("sluice bench -rate %s = %v, want an error with %q", tt.rate, err, tt.want)
		}
	}
}
