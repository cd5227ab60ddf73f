package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/cputime"
	"github.com/sluicehq/sluice/server/rules"
)

// BenchmarkDecideTopKeys measures a take of a named rule with the
// dashboard's top keys tracked (admin on) and not (admin off), on 10,000
// keys, with limits that deny every take (each denial counted in the
// rule's topkeys.Window, every one evicting: the worst case) and that
// deny none (the allowed path, which tracking must leave alone): through
// the rules engine and the rule's metered memory store (layer=engine),
// and through the HTTP API as sluice serve answers it (layer=http).
// Compare the pairs with benchstat: the tracking's cost is the ratio of
// topkeys=on to topkeys=off.
func BenchmarkDecideTopKeys(b *testing.B) {
	for _, layer := range []string{"engine", "http"} {
		for _, limit := range []string{"1/h", "1000000/s"} {
			for _, admin := range []bool{false, true} {
				name := fmt.Sprintf("layer=%s/limit=%s/topkeys=%s", layer, limit, map[bool]string{false: "off", true: "on"}[admin])
				b.Run(name, func(b *testing.B) { benchmarkDecide(b, layer, limit, admin) })
			}
		}
	}
}

func benchmarkDecide(b *testing.B, layer, limit string, admin bool) {
	text := fmt.Sprintf("rules:\n  - name: api\n    limits: [%q]\n", limit)
	if admin {
		text += "admin:\n  token: bench-token-0123456789\n"
	}
	c, err := config.Parse("b.yaml", []byte(text))
	if err != nil {
		b.Fatal(err)
	}
	s, err := NewService(context.Background(), c, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	decide := engineDecide(s)
	if layer == "http" {
		decide = httpDecide(b, s)
	}
	for i := range 10_000 { // warm: every key known, and over "1/h"
		decide(i)
	}
	b.ReportAllocs()
	var denied int
	cpu := cputime.Self()
	for i := 0; b.Loop(); i++ {
		if !decide(i % 10_000) {
			denied++
		}
	}
	b.ReportMetric(float64(cputime.Self()-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(denied)/float64(b.N), "denied/op")
}

func benchKey(i int) string { return fmt.Sprintf("10.0.%d.%d", i/256, i%256) }

// engineDecide returns a take of key i through the service's engine.
func engineDecide(s *Service) func(i int) bool {
	reqs := make([]rules.Request, 10_000)
	for i := range reqs {
		reqs[i] = rules.Request{Domain: "api", Descriptors: []rules.Descriptor{rules.Key(benchKey(i))}, Op: sluice.OpTake}
	}
	e, ctx := s.Engine(), context.Background()
	return func(i int) bool {
		res, err := e.Check(ctx, reqs[i])
		return err == nil && res.Allowed
	}
}

// httpDecide returns a take of key i through the service's HTTP API.
func httpDecide(b *testing.B, s *Service) func(i int) bool {
	h := s.Handler()
	bodies := make([]string, 10_000)
	for i := range bodies {
		bodies[i] = fmt.Sprintf(`{"rule":"api","key":%q}`, benchKey(i))
	}
	return func(i int) bool {
		r := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(bodies[i]))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
		return strings.Contains(w.Body.String(), `"allowed":true`)
	}
}

// BenchmarkLiveTick measures one second of the dashboard's work in the
// server: a sample of every rule's counters, a snapshot with the top keys
// (10 per rule, each peeked) and the bans, encoded once and written to
// the dashboards streaming it over loopback (0 or 5, read by clients in
// this process, whose CPU is counted too: an upper bound). Divide its
// cpu-ns/op by the CPU the server spends on a second of decisions for
// the share the dashboards take.
func BenchmarkLiveTick(b *testing.B) {
	for _, dashboards := range []int{0, 5} {
		b.Run(fmt.Sprintf("dashboards=%d", dashboards), func(b *testing.B) { benchmarkLiveTick(b, dashboards) })
	}
}

func benchmarkLiveTick(b *testing.B, dashboards int) {
	s, clk := newService(b, liveRules)
	e, ctx := s.Engine(), context.Background()
	for i := range 2000 { // 20 denied keys a rule, 100 bans
		for _, rule := range []string{"api", "login", "trial"} {
			_, _ = e.Check(ctx, rules.Request{Domain: rule, Descriptors: []rules.Descriptor{rules.Key(fmt.Sprintf("203.0.113.%d", i%20))}, Op: sluice.OpTake})
		}
		if i < 100 {
			_, _ = s.admin.Ban(ctx, ManualJail, banEntry(fmt.Sprintf("198.18.0.%d", i)), time.Hour, "bench")
		}
	}
	srv := httptest.NewServer(s.AdminHandler())
	b.Cleanup(srv.Close)
	b.Cleanup(s.admin.Feed().Close)
	for range dashboards {
		req, _ := http.NewRequest("GET", srv.URL+"/admin/api/events", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		res, err := srv.Client().Do(req)
		if err != nil || res.StatusCode != 200 {
			b.Fatalf("stream: %v %v", res, err)
		}
		r := bufio.NewReader(res.Body)
		if _, err := r.ReadString('\n'); err != nil { // the stream's first line: it is subscribed
			b.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, r); res.Body.Close() }()
	}
	b.ReportAllocs()
	cpu := cputime.Self()
	for b.Loop() {
		clk.Advance(time.Second)
		s.live.tick(ctx, clk.Now())
	}
	b.ReportMetric(float64(cputime.Self()-cpu)/float64(b.N), "cpu-ns/op")
}
