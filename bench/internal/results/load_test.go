package results

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestLoad reads each kind of results file and checks the number of
// samples and the median of some keys: raw benchmark output, a report of
// bench/cmd/ratio without raw results, and a service comparison.
func TestLoad(t *testing.T) {
	hot := "Memory/keys=hot/traffic=admit/run=serial"
	for _, tc := range []struct {
		file   string
		key    Key
		n      int
		median float64
	}{
		{"raw.txt", Key{hot, "sluice-gcra", "ns/op"}, 3, 42},
		{"raw.txt", Key{hot, "sethvargo", "ns/op"}, 3, 21},
		// The report's medians: one sample each, as printed.
		{"report.txt", Key{hot, "sluice-gcra", "ns/op"}, 1, 42},
		{"report.txt", Key{hot, "sethvargo", "admitted/op"}, 1, 0.011},
		{"report.txt", Key{"MemoryBytes/keys=1M", "x-time-rate", "B/key"}, 1, 120},
		{"report.txt", Key{"MemoryBytes/keys=1M", "sethvargo", "B/key"}, 0, 0},
		{"report.txt", Key{"Clock/time.Now", "", "ns/op"}, 1, 50},
		// The ratio tables are not read: no "ns/op" column as an impl.
		{"report.txt", Key{hot, "ns/op", "ns/op"}, 0, 0},
		// Service runs: CPU ticks of 10 ms over the requests of each run.
		{"service.jsonl", Key{"grpc-keys", "rl", ServerMicrosPerOp}, 3, 100},
		{"service.jsonl", Key{"grpc-keys", "rl", RedisMicrosPerOp}, 3, 27},
		{"service.jsonl", Key{"grpc-keys", "sr", ServerMicrosPerOp}, 3, 40},
		{"service.jsonl", Key{"grpc-keys", "sr", RedisMicrosPerOp}, 3, 13},
		{"service.jsonl", Key{"grpc-keys", "sr", DecisionsPerSecond}, 3, 20000},
		{"service.jsonl", Key{"grpc-hot", "rl", DecisionsPerSecond}, 1, 8000},
		{"service.jsonl", Key{"grpc-hot", "rl", ServerMicrosPerOp}, 0, 0},
	} {
		tab, err := Load(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatalf("Load(%s) = %v", tc.file, err)
		}
		s := tab.Summary(tc.key)
		if n := tab.Len(tc.key); n != tc.n || math.Abs(s.Median-tc.median) > 1e-9 {
			t.Errorf("Load(%s): Len, Summary(%v) = %d, %v, want %d samples of median %v", tc.file, tc.key, n, s, tc.n, tc.median)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, content string }{
		{"empty.txt", "PASS\nok  \tgithub.com/sluicehq/sluice/bench\t1.2s\n"},
		{"cells.txt", "### ns/op: median ±95% confidence interval\n\n| scenario | a | b |\n| --- | --- | --- |\n| S | 1 ±2% |\n"},
		{"number.txt", "### ns/op: median ±95% confidence interval\n\n| scenario | a |\n| --- | --- |\n| S | fast ±2% |\n"},
		{"empty.jsonl", ""},
		{"syntax.jsonl", `{"scen":"grpc-keys",` + "\n"},
		{"requests.jsonl", `{"scen":"grpc-keys","impl":"rl","cpu_ticks":10,"r":{"requests":0}}` + "\n"},
	} {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil {
			t.Errorf("Load(%s) = nil error, want one; content:\n%s", tc.name, tc.content)
		}
	}
	if _, err := Load(filepath.Join(dir, "missing.txt")); err == nil {
		t.Errorf("Load(missing.txt) = nil error, want one")
	}
}
