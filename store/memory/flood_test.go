package memory

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// raceEnabled reports whether the race detector is on (see race_test.go).
var raceEnabled bool

// The flood: 2 million distinct keys, each taking its one request per
// hour, into a store of 64 MiB, which holds under a million of them.
// floodEnv passes the child the prefix of the keys.
const (
	floodEnv      = "SLUICE_MEMORY_FLOOD_CHILD"
	floodMaxBytes = 64 << 20
	floodKeys     = 2_000_000
)

// TestFloodRSS checks that a process whose memory is a store at its cap
// stays within 1.25 times MaxBytes of resident memory, beyond what it
// held before the flood: the store counts what it holds (chunks, index,
// keys), and MemoryLimit keeps the collector from letting garbage grow
// the heap to twice what is live. The flood runs in a child process, the
// test binary run again, whose peak resident set (VmHWM) is its own; under
// the race detector, whose shadow memory would be measured too, the test
// binary is built again without it. Keys of 29 bytes are held in their
// slots; keys of 54 bytes apart, in a map (the store at 981a1b7 peaked at
// 3.0 times MaxBytes on those).
func TestFloodRSS(t *testing.T) {
	if prefix, ok := os.LookupEnv(floodEnv); ok {
		flood(t, prefix)
		return
	}
	bin := os.Args[0]
	if raceEnabled {
		goTool, err := exec.LookPath("go")
		if err != nil {
			t.Fatalf("the go command, to build the test without the race detector: %v", err)
		}
		bin = filepath.Join(t.TempDir(), "memory.test")
		if out, err := exec.Command(goTool, "test", "-c", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go test -c: %v\n%s", err, out)
		}
	}
	for _, prefix := range []string{"sluice:login:", "sluice:login:" + strings.Repeat("x", 25)} {
		t.Run(fmt.Sprintf("keys of %d bytes", len(prefix)+len("2001:db8::1e8480")), func(t *testing.T) {
			floodChild(t, bin, prefix)
		})
	}
}

// floodChild runs the flood with keys of prefix in a child process, the
// test binary bin, and checks the resident memory it reports.
func floodChild(t *testing.T, bin, prefix string) {
	cmd := exec.Command(bin, "-test.run=^TestFloodRSS$", "-test.count=1")
	cmd.Env = append(os.Environ(), floodEnv+"="+prefix)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the flood's child: %v\n%s", err, out)
	}
	var base, hwm, rss, bytes, states int64
	i := strings.Index(string(out), "flood:")
	if i < 0 {
		t.Fatalf("the flood's child printed no result:\n%s", out)
	}
	if _, err := fmt.Sscanf(string(out[i:]), "flood: baseline %d hwm %d rss %d bytes %d states %d", &base, &hwm, &rss, &bytes, &states); err != nil {
		t.Fatalf("the flood's child printed %q: %v", out[i:], err)
	}
	t.Logf("%d keys into MaxBytes %d MiB: %d states, %d bytes counted; resident %.1f MiB before, peak %.1f MiB (%.2fx MaxBytes beyond the baseline), %.1f MiB after",
		floodKeys, floodMaxBytes>>20, states, bytes, mib(base), mib(hwm), float64(hwm-base)/floodMaxBytes, mib(rss))
	if limit := base + floodMaxBytes*5/4; hwm > limit {
		t.Errorf("peak resident memory %.1f MiB, want at most %.1f MiB (the baseline plus 1.25 times MaxBytes)", mib(hwm), mib(limit))
	}
	if bytes > floodMaxBytes || states < floodMaxBytes/256 {
		t.Errorf("%d states in %d bytes counted; want at most MaxBytes %d, and a state per 256 bytes", states, bytes, floodMaxBytes)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// flood is the child's side of TestFloodRSS, with keys of prefix: it
// prints its resident memory before and after the flood.
func flood(t *testing.T, prefix string) {
	debug.SetMemoryLimit(MemoryLimit(floodMaxBytes))
	_, base := residentMemory(t)
	s := New(Config{MaxBytes: floodMaxBytes, SweepInterval: -1})
	defer s.Close()
	r := sluice.Request{Prefix: prefix, Limits: []sluice.Limit{{Rate: 1, Period: time.Hour}}, Cost: 1}
	now := t0
	buf := make([]byte, 0, 32)
	for i := range floodKeys {
		// A fresh string per key, as a server parsing requests makes.
		buf = strconv.AppendInt(append(buf[:0], "2001:db8::"...), int64(i), 16)
		r.Key, r.Now = string(buf), now.Add(time.Duration(i)*time.Microsecond)
		if _, err := s.Decide(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	hwm, rss := residentMemory(t)
	fmt.Printf("flood: baseline %d hwm %d rss %d bytes %d states %d\n", base, hwm, rss, s.Bytes(), s.Len())
}

// residentMemory returns the peak and current resident set of the
// process (VmHWM and VmRSS of /proc/self/status), in bytes.
func residentMemory(t *testing.T) (hwm, rss int64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		switch f[0] {
		case "VmHWM:":
			hwm = v << 10
		case "VmRSS:":
			rss = v << 10
		}
	}
	if hwm == 0 || rss == 0 {
		t.Fatal("no VmHWM or VmRSS in /proc/self/status")
	}
	return hwm, rss
}
