package accesslog

import (
	"bytes"
	"testing"

	"github.com/sluicehq/sluice/simulate/loggen"
)

// BenchmarkParse reads a generated log of a million combined lines
// through a Stream and a Reader, parsing on every core, deciding
// nothing: the input side of a replay.
func BenchmarkParse(b *testing.B) {
	var buf bytes.Buffer
	if err := loggen.Write(&buf, 1_000_000, loggen.Config{Seed: 1}); err != nil {
		b.Fatal(err)
	}
	log := buf.Bytes()
	b.ReportAllocs()
	b.SetBytes(int64(len(log)))
	b.ResetTimer()
	for range b.N {
		s, err := Open(bytes.NewReader(log), Config{})
		if err != nil {
			b.Fatal(err)
		}
		r := NewReader([]*Stream{s}, []string{"log"})
		n := 0
		for e := r.Next(); e != nil; e = r.Next() {
			n++
		}
		r.Close()
		if n != 1_000_000 {
			b.Fatalf("%d entries", n)
		}
	}
	b.ReportMetric(float64(b.N)*1e6/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkCombined parses one line, on one core.
func BenchmarkCombined(b *testing.B) {
	line := []byte(`100.99.167.149 - - [05/Jan/2026:00:00:00 +0000] "GET /page/1232 HTTP/1.1" 200 512 "-" "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0"`)
	var c Combined
	var e Entry
	b.ReportAllocs()
	for range b.N {
		if err := c.Parse(line, &e); err != nil {
			b.Fatal(err)
		}
	}
}
