package main

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkColdStart measures how long a cold "sluice serve" with the
// default configuration takes to be ready: from exec of the built binary
// to the first 200 from GET /readyz. It reports the median and the
// slowest run (ms-ready, ms-ready-max) and asserts nothing. Run it with a
// fixed count of starts:
//
//	go test ./cmd/sluice -run '^$' -bench ColdStart -benchtime 20x
func BenchmarkColdStart(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "sluice")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		b.Fatalf("go build: %v", err)
	}
	client := &http.Client{Timeout: time.Second}
	var times []time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		cmd := exec.Command(bin, "serve", "-listen", "127.0.0.1:0")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		url, ok := strings.CutPrefix(strings.TrimSpace(line), "sluice: listening on ")
		if err != nil || !ok {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			b.Fatalf("serve printed %q, %v; want its address", line, err)
		}
		ready := false
		for deadline := time.Now().Add(5 * time.Second); !ready && time.Now().Before(deadline); {
			resp, err := client.Get(url + "/readyz")
			if err == nil {
				resp.Body.Close()
				ready = resp.StatusCode == http.StatusOK
			}
		}
		elapsed := time.Since(start)
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if !ready {
			b.Fatal("serve not ready within 5s")
		}
		times = append(times, elapsed)
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms-ready")
	b.ReportMetric(float64(times[len(times)-1].Microseconds())/1000, "ms-ready-max")
	b.ReportAllocs()
}
