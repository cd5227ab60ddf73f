package server

import (
	"context"
	"math"

	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testing/rlstest"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/server/rules"
)

// serveGRPC serves Envoy's RLS API of s on a loopback listener and
// returns a client of it, both stopped when the test ends.
func serveGRPC(t *testing.T, s *Service) pb.RateLimitServiceClient {
	t.Helper()
	return pb.NewRateLimitServiceClient(rlstest.Serve(t, s.RateLimitService()))
}

// redisCounters reads, over one connection kept open (so that the
// counting costs exactly one read of its own), how many reads of client
// data the server has processed and how many EVALSHA it has run.
type redisCounters struct{ c *goredis.Client }

func newRedisCounters(t *testing.T, addr string) *redisCounters {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 1, MinIdleConns: 1})
	t.Cleanup(func() { c.Close() })
	rc := &redisCounters{c}
	rc.read(t) // the connection's setup is not counted
	return rc
}

// fewestReads runs do five times and returns the fewest reads of client
// data one run cost on Redis, checking that each made evalsha EVALSHA
// calls. A single run is not enough: rueidis now and then sends one
// pipelined batch in two writes, which Redis counts as two reads.
func (rc *redisCounters) fewestReads(t *testing.T, do func(), evalsha int64) int64 {
	t.Helper()
	fewest := int64(math.MaxInt64)
	for range 5 {
		reads0, evals0 := rc.read(t)
		do()
		reads1, evals1 := rc.read(t)
		if got := evals1 - evals0; got != evalsha {
			t.Errorf("EVALSHA calls = %d, want %d", got, evalsha)
		}
		fewest = min(fewest, reads1-reads0-1) // less the second INFO's own read
	}
	return fewest
}

func (rc *redisCounters) read(t *testing.T) (reads, evalsha int64) {
	t.Helper()
	info, err := rc.c.Info(context.Background(), "stats", "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO: %v", err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_reads_processed:"); ok {
			reads, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
			n, _, _ := strings.Cut(v, ",")
			evalsha, _ = strconv.ParseInt(n, 10, 64)
		}
	}
	return reads, evalsha
}

// TestGRPCBatchOneRoundTrip checks, on a real redis-server, that the
// descriptors of one ShouldRateLimit reach Redis in one round trip
// through every layer of the service's store (metrics, failure policy,
// store/fallback): one read of client data on the server, carrying one
// EVALSHA per descriptor (each descriptor is its own atomic decision, as
// in Envoy's service). It counts INFO's total_reads_processed, which one
// pipelined write raises by one, and commandstats.
func TestGRPCBatchOneRoundTrip(t *testing.T) {
	const domain = `rules:
  - domain: edge
    descriptors:
      - key: remote_address
        limits: ["100/min"]
      - key: path
        limits: ["100/min sliding"]
      - key: user
        limits: ["100/min", "1000/h fixed"]
`
	for _, tc := range []struct{ name, failure string }{
		// A timeout no busy machine reaches: the test counts round
		// trips, and a degraded answer would not make one.
		{"default (local)", "failure: {timeout: 10s}\n"},
		{"open", "failure: {policy: open, timeout: 10s}\n"},
		{"closed", "failure: {policy: closed, timeout: 10s}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A server of its own: the connections of other tests,
			// closing, would be reads too.
			r := testserver.StartRedis(t)
			s := newRedisService(t, r.Addr, domain+tc.failure)
			c := serveGRPC(t, s)
			req := &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{
				rlstest.Descriptor("remote_address=203.0.113.7"), rlstest.Descriptor("path=/login"), rlstest.Descriptor("user=bob"),
			}}
			rlstest.ShouldRateLimit(t, c, req) // loads the script, opens the connections
			counters := newRedisCounters(t, r.Addr)
			left := uint32(99)
			reads := counters.fewestReads(t, func() {
				resp := rlstest.ShouldRateLimit(t, c, req)
				left--
				if resp.OverallCode != pb.RateLimitResponse_OK || len(resp.Statuses) != 3 || resp.Statuses[2].LimitRemaining != left {
					t.Fatalf("ShouldRateLimit = %v, want OK with %d left of user's limit", resp, left)
				}
			}, 3)
			if reads != 1 {
				t.Errorf("reads of client data on Redis = %d, want 1 round trip for the 3 descriptors", reads)
			}
			// The metrics still count each descriptor: 3 for each of the
			// 6 requests.
			w := do(t, s.Handler(), http.MethodGet, "/metrics", "")
			if want := `sluice_decisions_total{op="take",result="allowed",rule="edge"} 18`; !strings.Contains(w.Body.String(), want) {
				t.Errorf("/metrics lacks %q:\n%s", want, grepLines(w.Body.String(), "sluice_decisions_total"))
			}
		})
	}
}

// TestBatchRefundOneRoundTrip checks that a request denied as a whole
// gives its allowed descriptors back in one more round trip, not one per
// descriptor.
func TestBatchRefundOneRoundTrip(t *testing.T) {
	r := testserver.StartRedis(t)
	s := newRedisService(t, r.Addr, `rules:
  - domain: edge
    descriptors:
      - key: a
        limits: ["10/min"]
      - key: b
        limits: ["10/min"]
      - key: c
        limits: ["1/min"]
`)
	c := serveGRPC(t, s)
	req := &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{
		rlstest.Descriptor("a=x"), rlstest.Descriptor("b=x"), rlstest.Descriptor("c=x"),
	}}
	rlstest.ShouldRateLimit(t, c, req) // takes c's only unit
	counters := newRedisCounters(t, r.Addr)
	reads := counters.fewestReads(t, func() {
		resp := rlstest.ShouldRateLimit(t, c, req)
		if resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT || resp.Statuses[0].LimitRemaining != 9 || resp.Statuses[1].LimitRemaining != 9 {
			t.Fatalf("ShouldRateLimit = %v, want OVER_LIMIT with a and b given back (9 left each)", resp)
		}
	}, 3) // the 3 GCRA takes in one, 2 refunds
	if reads != 2 {
		t.Errorf("reads of client data on Redis = %d, want 2 round trips (the takes, the refunds)", reads)
	}
}

// BenchmarkRedisDescriptors measures, on a real redis-server through
// every layer of the service's store, one request of three descriptors
// (one round trip) against three requests of one (three, as every
// multi-descriptor request cost before the layers batched), and reports
// the round trips each costs from INFO total_reads_processed.
func BenchmarkRedisDescriptors(b *testing.B) {
	r := testserver.StartRedis(b)
	c, err := config.Parse("redis.yaml", []byte("store: {type: redis, redis: {addrs: [\""+r.Addr+"\"]}}\n"+`rules:
  - domain: edge
    descriptors:
      - key: remote_address
        limits: ["1000000/s"]
      - key: path
        limits: ["1000000/s"]
      - key: user
        limits: ["1000000/s"]
`))
	if err != nil {
		b.Fatal(err)
	}
	s, err := NewService(context.Background(), c, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	descs := [][]rules.Descriptor{
		{{Entries: []rules.Entry{{Key: "remote_address", Value: "203.0.113.7"}}}},
		{{Entries: []rules.Entry{{Key: "path", Value: "/login"}}}},
		{{Entries: []rules.Entry{{Key: "user", Value: "bob"}}}},
	}
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		reqs []rules.Request
	}{
		{"one request of 3", []rules.Request{{Domain: "edge", Descriptors: append(append(descs[0][:1:1], descs[1]...), descs[2]...)}}},
		{"3 requests of 1", []rules.Request{{Domain: "edge", Descriptors: descs[0]}, {Domain: "edge", Descriptors: descs[1]}, {Domain: "edge", Descriptors: descs[2]}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			reads := func() int64 {
				info, err := r.Info("stats")
				if err != nil {
					b.Fatal(err)
				}
				n, _ := strconv.ParseInt(info["total_reads_processed"], 10, 64)
				return n
			}
			before := reads()
			for b.Loop() {
				for _, req := range bc.reqs {
					if res, err := s.Engine().Check(ctx, req); err != nil || !res.Allowed {
						b.Fatalf("Check = %+v, %v; want allowed", res, err)
					}
				}
			}
			// Less INFO's own reads (its request and its connection's
			// close).
			b.ReportMetric(float64(reads()-before-2)/float64(b.N), "round-trips/op")
		})
	}
}
