package rlqs_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/cputime"
	"github.com/sluicehq/sluice/internal/testing/servicetest"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/server"
)

// BenchmarkReport is the service's cost of one report of one bucket by
// one of 8 edges (its admissions inserted into the rule, the share asked
// of the store, the answer sent), on the Redis store: what a quota at
// the edge costs the service per edge per report interval.
func BenchmarkReport(b *testing.B) {
	r := testserver.StartRedis(b)
	svc := servicetest.New(b, fmt.Sprintf(`store: {type: redis, redis: {addrs: [%q]}}
rules:
  - {name: api, limits: ["1000/s"]}
quota:
  buckets:
    - {domain: edge, rule: api}
`, r.Addr), server.Options{})
	q := svc.QuotaService()
	id := map[string]string{"name": "api"}
	var edges []*fakeStream
	for i := range 8 {
		f := open(b, q, fmt.Sprint("edge-", i))
		f.report(b, "edge", usage(id, 1, 0))
		edges = append(edges, f)
	}
	info, err := r.Info("server")
	if err != nil {
		b.Fatal(err)
	}
	redisPID, err := strconv.Atoi(info["process_id"])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	self, redis := cputime.Self(), redisCPU(b, redisPID)
	n := 0
	for ; b.Loop(); n++ {
		edges[n%len(edges)].report(b, "", usage(id, 500, 100))
	}
	b.ReportMetric(float64(cputime.Self()-self)/float64(n), "cpu-ns/op")
	b.ReportMetric(float64(redisCPU(b, redisPID)-redis)/float64(n), "redis-cpu-ns/op")
}

func redisCPU(b *testing.B, pid int) time.Duration {
	d, err := cputime.Of(pid)
	if err != nil {
		b.Fatal(err)
	}
	return d
}
