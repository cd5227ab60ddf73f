package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/cputime"
	"github.com/sluicehq/sluice/internal/testing/rlqstest"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

var rlqsCostRate = flag.Float64("rlqs.cost.rate", 500, "decisions a second of each of the 8 edges, in BenchmarkRLQSCost")

// The load of both doors: 8 edges, each deciding -rlqs.cost.rate
// requests a second of one bucket, for 10 s a pass.
const (
	costEdges = 8
	costPass  = 10 * time.Second
	costWarm  = 2 * time.Second
)

// BenchmarkRLQSCost measures the cost target of #36 side by side in one run:
// the CPU time of sluice serve and its Redis (from /proc/<pid>/stat) per
// 1,000 decisions of one rule, when 8 Envoys ask Envoy's RLS for each
// request, and when they decide locally under RLQS shares, reporting
// every second; the same offered load, the same duration, passes
// interleaved, after 2 s of the same load (the steady state), with the
// CPU of an idle pass for reference. The target of #36 is RLQS ≤ 1/50
// of RLS; this is a measurement that reports the ratio (docs/service.md
// quotes it), not a check: the ratio grows with each edge's rate, which
// the target leaves open. It is one measurement, whatever b.N (about a
// minute): run it with -benchtime 1x.
func BenchmarkRLQSCost(b *testing.B) {
	for b.Loop() {
		rlqsCostOnce(b)
	}
}

func rlqsCostOnce(t *testing.B) {
	redis := testserver.StartRedis(t)
	cfg := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, cfg, fmt.Sprintf(`store: {type: redis, redis: {addrs: [%q]}}
rules:
  - name: api
    limits: ["1000/s"]
quota:
  report_interval: 1s
  buckets:
    - {domain: edge, rule: api}
`, redis.Addr))
	rep := startReplica(t, cfg)
	info, err := redis.Info("server")
	if err != nil {
		t.Fatal(err)
	}
	redisPID, err := strconv.Atoi(info["process_id"])
	if err != nil {
		t.Fatalf("redis process_id %q: %v", info["process_id"], err)
	}
	pids := []int{rep.cmd.Process.Pid, redisPID}
	conn, err := grpc.NewClient(rep.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rls := pb.NewRateLimitServiceClient(conn)

	idle := measure(t, pids, func(int) {})
	var cost [2]costSum // RLS, RLQS
	for range 2 {
		cost[0].add(measure(t, pids, rlsDecide(t, rls)))
		clients, decide := rlqsEdges(t, rep.grpc)
		cost[1].add(measure(t, pids, decide))
		for i, c := range clients {
			if l := c.Log(); l.Reports < int(costPass/time.Second) || l.StreamErrors > 0 {
				t.Errorf("RLQS edge %d: %d reports, %d stream errors; want one a second, none", i, l.Reports, l.StreamErrors)
			}
			c.Close()
		}
	}
	perK := func(c costSum) float64 { return c.cpu.Seconds() * 1e3 / float64(c.decisions) * 1e3 }
	rlsK, rlqsK := perK(cost[0]), perK(cost[1])
	t.Logf("Envoy RLS per request: %d decisions, %v CPU (sluice serve + Redis): %.3f ms per 1,000", cost[0].decisions, cost[0].cpu, rlsK)
	t.Logf("RLQS, 1 s reports:     %d decisions, %v CPU (sluice serve + Redis): %.3f ms per 1,000", cost[1].decisions, cost[1].cpu, rlqsK)
	t.Logf("RLQS / RLS = 1/%.0f", rlsK/max(rlqsK, 1e-9))
	t.ReportMetric(rlsK, "rls-cpu-ms/1k")
	t.ReportMetric(rlqsK, "rlqs-cpu-ms/1k")
	t.ReportMetric(rlsK/max(rlqsK, 1e-9), "rls/rlqs")
	t.Logf("idle (no load), for reference: %v CPU in %v", idle.cpu, costPass)
	net := func(c costSum) float64 { return (c.cpu - 2*idle.cpu).Seconds() * 1e6 / float64(c.decisions) }
	t.Logf("net of idle: RLS %.3f ms, RLQS %.3f ms per 1,000: 1/%.0f", net(cost[0]), net(cost[1]), net(cost[0])/max(net(cost[1]), 1e-9))
	t.Logf("per RLQS report (8 edges, one a second), net of idle: %.0f µs",
		(cost[1].cpu-2*idle.cpu).Seconds()*1e6/float64(2*costEdges*int(costPass/time.Second)))
}

type costSum struct {
	cpu       time.Duration
	decisions int64
}

func (c *costSum) add(o costSum) { c.cpu += o.cpu; c.decisions += o.decisions }

// measure runs decide from costEdges paced goroutines, and returns the
// CPU time pids used and the decisions made over costPass, after
// costWarm of the same load (streams opened, shares settled: the steady
// state).
func measure(t testing.TB, pids []int, decide func(edge int)) costSum {
	t.Helper()
	cpu := func() time.Duration {
		var sum time.Duration
		for _, pid := range pids {
			d, err := cputime.Of(pid)
			if err != nil {
				t.Fatal(err)
			}
			sum += d
		}
		return sum
	}
	ctx, cancel := context.WithCancel(t.Context())
	var n atomic.Int64
	done := make(chan struct{})
	go func() { paced(ctx, decide, &n); close(done) }()
	time.Sleep(costWarm)
	c0, n0 := cpu(), n.Load()
	time.Sleep(costPass)
	c1, n1 := cpu(), n.Load()
	cancel()
	<-done
	return costSum{cpu: c1 - c0, decisions: n1 - n0}
}

// paced calls decide from costEdges goroutines, each costPerEdge times a
// second, until ctx ends, counting the calls in n.
func paced(ctx context.Context, decide func(edge int), n *atomic.Int64) {
	var wg sync.WaitGroup
	start := time.Now()
	for e := range costEdges {
		wg.Go(func() {
			for i := 1; ctx.Err() == nil; i++ {
				next := start.Add(time.Duration(float64(i) * float64(time.Second) / *rlqsCostRate))
				if d := time.Until(next); d > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(d):
					}
				}
				decide(e)
				n.Add(1)
			}
		})
	}
	wg.Wait()
}

// rlsDecide asks Envoy's RLS for one decision, as Envoy's ratelimit
// filter does for every request: the named rule api, key name=api.
func rlsDecide(t testing.TB, rls pb.RateLimitServiceClient) func(int) {
	req := &pb.RateLimitRequest{Domain: "api", HitsAddend: 1, Descriptors: []*rlv3.RateLimitDescriptor{
		{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "key", Value: "name=api"}}}}}
	return func(int) {
		if _, err := rls.ShouldRateLimit(t.Context(), req); err != nil {
			t.Errorf("RLS: %v", err)
		}
	}
}

// rlqsEdges returns one Envoy-like RLQS client per edge, reporting every
// second, and the decision of a request in one of them.
func rlqsEdges(t testing.TB, addr string) ([]*rlqstest.Client, func(int)) {
	clients := make([]*rlqstest.Client, costEdges)
	for i := range clients {
		c, err := rlqstest.New(rlqstest.Config{Targets: []string{addr}, Domain: "edge", Interval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		clients[i] = c
	}
	id := map[string]string{"name": "api"}
	return clients, func(e int) { clients[e].Allow(id) }
}
