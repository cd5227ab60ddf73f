package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/server/rules"
)

// BenchmarkDecideTopKeys measures a take of a named rule through the
// rules engine and the rule's metered memory store, with the dashboard's
// top keys tracked (admin on) and not (admin off), on 10,000 keys: with
// limits that deny most takes (each denial counted in the rule's
// topkeys.Window) and that deny none (the allowed path, which tracking
// must leave alone). Compare the pairs with benchstat: the tracking's
// cost is the ratio of topkeys=on to topkeys=off.
func BenchmarkDecideTopKeys(b *testing.B) {
	for _, limit := range []string{"1/h", "1000000/s"} {
		for _, admin := range []bool{false, true} {
			name := fmt.Sprintf("limit=%s/topkeys=%s", limit, map[bool]string{false: "off", true: "on"}[admin])
			b.Run(name, func(b *testing.B) { benchmarkDecide(b, limit, admin) })
		}
	}
}

func benchmarkDecide(b *testing.B, limit string, admin bool) {
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
	reqs := make([]rules.Request, 10_000)
	for i := range reqs {
		reqs[i] = rules.Request{Domain: "api", Descriptors: []rules.Descriptor{rules.Key(fmt.Sprintf("10.0.%d.%d", i/256, i%256))}, Op: sluice.OpTake}
	}
	e, ctx := s.Engine(), context.Background()
	for _, r := range reqs { // warm: every key known, and over "1/h"
		_, _ = e.Check(ctx, r)
	}
	b.ReportAllocs()
	var denied int
	cpu := cpuTime()
	for i := 0; b.Loop(); i++ {
		res, err := e.Check(ctx, reqs[i%len(reqs)])
		if err != nil {
			b.Fatal(err)
		}
		if !res.Allowed {
			denied++
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(denied)/float64(b.N), "denied/op")
}

// cpuTime returns the CPU time the process has used (user and system):
// on a shared machine, steadier than the wall time of a benchmark.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
