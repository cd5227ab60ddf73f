package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

const outcomeRules = "rules:\n  - name: login\n    limits: [\"20/min\"]\n"

// TestReportOnceAcrossProcesses has 4 OS processes report the same
// failure 3 times each, with one id, and a failure of their own once:
// the rule counts 5. On the memory store the processes report to one
// service; on Redis each runs a service of its own on the shared store.
func TestReportOnceAcrossProcesses(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		s, _ := newServiceOpts(t, outcomeRules, "")
		srv := httptest.NewServer(s.Handler())
		defer srv.Close()
		runReporters(t, "SLUICE_OUTCOME_URL="+srv.URL)
		expectRemaining(t, srv.URL, 14)
	})
	t.Run("redis", func(t *testing.T) {
		r := testserver.StartRedis(t)
		ns := fmt.Sprintf("outcome%d", time.Now().UnixNano())
		runReporters(t, "SLUICE_OUTCOME_REDIS="+r.Addr, "SLUICE_OUTCOME_NS="+ns)
		s, _ := newServiceOpts(t, redisStore(r.Addr)+outcomeRules, ns)
		srv := httptest.NewServer(s.Handler())
		defer srv.Close()
		expectRemaining(t, srv.URL, 14)
	})
}

// runReporters runs 4 reporter processes with env and waits for them.
func runReporters(t *testing.T, env ...string) {
	t.Helper()
	cmds := make([]*exec.Cmd, 4)
	outs := make([]*strings.Builder, 4)
	for i := range cmds {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmds[i] = exec.CommandContext(ctx, os.Args[0], "-test.run=^TestOutcomeReporter$", "-test.count=1", "-test.v")
		cmds[i].Env = append(append(os.Environ(), env...), "SLUICE_OUTCOME_REPORTER="+strconv.Itoa(i))
		outs[i] = &strings.Builder{}
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("reporter %d: %v\n%s", i, err, outs[i])
		}
	}
}

// TestOutcomeReporter is a reporter process of
// TestReportOnceAcrossProcesses; it does nothing when run on its own.
func TestOutcomeReporter(t *testing.T) {
	me := os.Getenv("SLUICE_OUTCOME_REPORTER")
	if me == "" {
		return // not a reporter
	}
	base := os.Getenv("SLUICE_OUTCOME_URL")
	if addr := os.Getenv("SLUICE_OUTCOME_REDIS"); addr != "" {
		s, _ := newServiceOpts(t, redisStore(addr)+outcomeRules, os.Getenv("SLUICE_OUTCOME_NS"))
		srv := httptest.NewServer(s.Handler())
		defer srv.Close()
		base = srv.URL
	}
	report := func(id string) {
		resp, err := http.Post(base+"/v1/report", "application/json",
			strings.NewReader(`{"rule":"login","key":"mallory","id":"`+id+`","outcome":"failure"}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("report %s: %d %s", id, resp.StatusCode, body)
		}
	}
	for range 3 {
		report("shared-failure")
	}
	report("own-" + me)
}

// expectRemaining checks what a peek of the login rule for mallory has
// left after it.
func expectRemaining(t *testing.T, base string, want int) {
	t.Helper()
	resp, err := http.Post(base+"/v1/check", "application/json", strings.NewReader(`{"rule":"login","key":"mallory","peek":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"remaining":`+strconv.Itoa(want)+",") {
		t.Errorf("peek after the reports = %s, want remaining %d (5 failures counted of 20)", body, want)
	}
}

// redisStore is the store section of a service on the Redis at addr.
func redisStore(addr string) string {
	return "store: {type: redis, redis: {addrs: [\"" + addr + "\"]}}\n"
}

// newServiceOpts returns a Service for the configuration text with the
// real clock, under namespace ns (default for ""), closed when the test
// ends.
func newServiceOpts(t *testing.T, text, ns string) (*Service, *config.Config) {
	t.Helper()
	c, err := config.Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewService(context.Background(), c, Options{Namespace: ns, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, c
}
