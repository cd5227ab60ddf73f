package simulate

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/cputime"
	"github.com/sluicehq/sluice/simulate/accesslog"
	"github.com/sluicehq/sluice/simulate/loggen"
)

// benchLines is the size of the benchmarks' log: a day of 100,000 Zipf
// clients and the rest of loggen's cast.
const benchLines = 1_000_000

var benchLog []byte

func logForBench(b *testing.B) []byte {
	b.Helper()
	if benchLog == nil {
		var buf bytes.Buffer
		if err := loggen.Write(&buf, benchLines, loggen.Config{Seed: 1}); err != nil {
			b.Fatal(err)
		}
		benchLog = buf.Bytes()
	}
	return benchLog
}

// logFileForBench writes the benchmarks' log to a file of its own, and
// returns its name and size. Replay and Scan read the file, as sluice
// simulate does, rather than a buffer: a log of 135 MB held in the heap
// would make the collector run ten times less often than in the
// command.
func logFileForBench(b *testing.B) (string, int64) {
	b.Helper()
	name := filepath.Join(b.TempDir(), "access.log")
	f, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = loggen.Write(w, benchLines, loggen.Config{Seed: 1})
	if err == nil {
		err = w.Flush()
	}
	if err2 := f.Close(); err == nil {
		err = err2
	}
	fi, err2 := os.Stat(name)
	if err != nil || err2 != nil {
		b.Fatal(err, err2)
	}
	return name, fi.Size()
}

// reportCPU reports the CPU nanoseconds the process used per line since
// start (a cputime.Self reading).
func reportCPU(b *testing.B, start time.Duration, lines int) {
	if t := cputime.Self(); t > 0 && start > 0 {
		b.ReportMetric(float64(t-start)/float64(lines), "cpu-ns/line")
	}
}

// BenchmarkReplay replays the log end to end, parsing in parallel with
// deciding, on the memory store: through one rule (rules=one) and
// through every rule of `sluice config sample` (rules=sample: three
// named rules, five limits, each line checked against each), on one
// worker (in log order) and on as many as there are processors (the
// default). BenchmarkScan is a bare bufio line scan of the same log, the
// floor to compare with.
func BenchmarkReplay(b *testing.B) {
	log, size := logFileForBench(b)
	one, err := configFor("rules:\n  - name: web\n    limits: [\"60/min\"]\n")
	if err != nil {
		b.Fatal(err)
	}
	sample, err := config.Parse("sample.yaml", config.Sample())
	if err != nil {
		b.Fatal(err)
	}
	for _, rs := range []struct {
		name string
		cfg  *config.Config
	}{{"one", one}, {"sample", sample}} {
		for _, workers := range []int{1, 0} {
			b.Run("rules="+rs.name+"/workers="+strconv.Itoa(workers), func(b *testing.B) {
				replayBench(b, rs.cfg, log, size, workers)
			})
		}
	}
}

func replayBench(b *testing.B, cfg *config.Config, log string, size int64, workers int) {
	b.ReportAllocs()
	b.SetBytes(size)
	start := cputime.Self()
	b.ResetTimer()
	var denied int64
	for range b.N {
		rep, err := Run(context.Background(), Options{Config: Config{Rules: cfg}, Files: []string{log}, Workers: workers})
		if err != nil || rep.Requests != benchLines {
			b.Fatalf("Run = %v, %d requests", err, rep.Requests)
		}
		denied = 0
		for _, r := range rep.Rules {
			denied += r.WouldDeny
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*benchLines)/b.Elapsed().Seconds(), "lines/s")
	b.ReportMetric(float64(denied), "denied")
	reportCPU(b, start, b.N*benchLines)
}

func BenchmarkScan(b *testing.B) {
	log, size := logFileForBench(b)
	b.ReportAllocs()
	b.SetBytes(size)
	start := cputime.Self()
	b.ResetTimer()
	for range b.N {
		f, err := os.Open(log)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		n := 0
		for sc.Scan() {
			n++
		}
		f.Close()
		if n != benchLines || sc.Err() != nil {
			b.Fatalf("%d lines, %v", n, sc.Err())
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*benchLines)/b.Elapsed().Seconds(), "lines/s")
	reportCPU(b, start, b.N*benchLines)
}

// BenchmarkDecide decides parsed entries one by one through a Replayer,
// without reading: the deciding side of a replay (serve's forward-auth
// path, and the tallies).
func BenchmarkDecide(b *testing.B) {
	log := logForBench(b)
	cfg, err := configFor("rules:\n  - name: web\n    limits: [\"60/min\"]\n")
	if err != nil {
		b.Fatal(err)
	}
	s, err := accesslog.Open(bytes.NewReader(log), accesslog.Config{})
	if err != nil {
		b.Fatal(err)
	}
	rd := accesslog.NewReader([]*accesslog.Stream{s}, []string{"log"})
	var entries []accesslog.Entry
	for e := rd.Next(); e != nil; e = rd.Next() {
		c := *e
		c.Addr = bytes.Clone(e.Addr) // the only field the default key reads
		entries = append(entries, c)
	}
	rd.Close()
	rp, err := NewReplayer(context.Background(), Config{Rules: cfg})
	if err != nil {
		b.Fatal(err)
	}
	defer rp.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		rp.Decide(context.Background(), &entries[i%len(entries)])
	}
}
