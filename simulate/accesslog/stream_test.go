package accesslog

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
)

// line returns a combined line of client i at second s after t0.
func line(i, s int) string {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(s) * time.Second)
	return fmt.Sprintf(`10.0.%d.%d - - [%s] "GET /p/%d HTTP/1.1" 200 1 "-" "ua"`, i/256%256, i%256, t.Format("02/Jan/2006:15:04:05 -0700"), s)
}

// readAll reads every entry of the logs, merged, and returns their
// lines ("source:line") and the stats.
func readAll(t *testing.T, c Config, logs ...io.Reader) ([]string, Stats) {
	t.Helper()
	var streams []*Stream
	var names []string
	for i, l := range logs {
		c.Source = i
		s, err := Open(l, c)
		if err != nil {
			t.Fatalf("Open(%d) = %v", i, err)
		}
		streams, names = append(streams, s), append(names, fmt.Sprint("log", i))
	}
	r := NewReader(streams, names)
	defer r.Close()
	var got []string
	for e := r.Next(); e != nil; e = r.Next() {
		got = append(got, fmt.Sprintf("%d:%d", e.Source, e.Line))
	}
	return got, r.Stats
}

// TestStreamBadInput checks that every kind of bad line is counted with
// its line number, and that the good lines around it are all read.
func TestStreamBadInput(t *testing.T) {
	huge := strings.Repeat("x", 3*chunkSize) // over the cap, and over a chunk
	log := strings.Join([]string{
		line(1, 1),
		"\x00\x01binary\xff garbage",
		line(2, 2) + "\r", // CRLF
		"",
		huge,
		line(3, 3),
		"1.2.3.4 - - " + strings.Repeat("[", DefaultMaxLine), // just over the cap, inside a chunk
		line(4, 4),
		huge, // the last line, unterminated, over the cap
	}, "\n")
	got, st := readAll(t, Config{Workers: 3}, strings.NewReader(log))
	if want := "[0:1 0:3 0:6 0:8]"; fmt.Sprint(got) != want {
		t.Errorf("entries = %v, want %s", got, want)
	}
	if st.Lines != 9 || st.Malformed != 4 || st.Entries != 4 {
		t.Errorf("stats lines %d malformed %d entries %d, want 9, 4, 4", st.Lines, st.Malformed, st.Entries)
	}
	var lines []int64
	for _, m := range st.Samples {
		lines = append(lines, m.Line)
		if len(m.Text) > sampleLen+50 {
			t.Errorf("sample of line %d holds %d bytes", m.Line, len(m.Text))
		}
	}
	if fmt.Sprint(lines) != "[2 5 7 9]" {
		t.Errorf("malformed lines = %v, want [2 5 7 9]", lines)
	}
}

// TestStreamGzip reads a gzip log whole, then cut short.
func TestStreamGzip(t *testing.T) {
	var plain strings.Builder
	for i := range 5000 {
		plain.WriteString(line(i, i) + "\n")
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = io.WriteString(zw, plain.String())
	_ = zw.Close()
	got, st := readAll(t, Config{}, bytes.NewReader(z.Bytes()))
	if len(got) != 5000 || len(st.Errors) != 0 {
		t.Fatalf("gzip: %d entries, errors %v; want 5000, none", len(got), st.Errors)
	}
	got, st = readAll(t, Config{}, bytes.NewReader(z.Bytes()[:z.Len()/2]))
	if len(got) == 0 || len(got) >= 5000 || len(st.Errors) != 1 || !strings.Contains(st.Errors[0].Error(), "truncated") {
		t.Errorf("truncated gzip: %d entries, errors %v; want some, and one error saying truncated", len(got), st.Errors)
	}
	if _, err := Open(bytes.NewReader([]byte{0x1f, 0x8b, 0, 0}), Config{}); err == nil {
		t.Error("Open of a broken gzip header = nil error")
	}
}

// TestReaderMerge merges logs that interleave in time, one of them
// slightly out of order, and another in another time zone.
func TestReaderMerge(t *testing.T) {
	a := line(0, 1) + "\n" + line(0, 4) + "\n" + line(0, 3) + "\n"
	// b logs 2 and 5 in UTC+02:00.
	tz := time.FixedZone("", 2*3600)
	stamp := func(s int) string {
		return time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC).In(tz).Format("02/Jan/2006:15:04:05 -0700")
	}
	b := fmt.Sprintf("1.1.1.1 - - [%s] \"GET / HTTP/1.1\" 200 1\n1.1.1.1 - - [%s] \"GET / HTTP/1.1\" 200 1\n", stamp(2), stamp(5))
	got, st := readAll(t, Config{}, strings.NewReader(a), strings.NewReader(b))
	if want := "[0:1 1:1 0:2 0:3 1:2]"; fmt.Sprint(got) != want {
		t.Errorf("merged = %v, want %s", got, want)
	}
	if st.Backwards != 1 {
		t.Errorf("Backwards = %d, want 1", st.Backwards)
	}
}

// TestStreamOrder reads many chunks on several parsers: the entries come
// in the order of the lines.
func TestStreamOrder(t *testing.T) {
	var log strings.Builder
	rng := rand.New(rand.NewPCG(1, 2))
	n := 0
	for log.Len() < 5*chunkSize {
		if rng.IntN(50) == 0 {
			log.WriteString("junk\n")
		} else {
			log.WriteString(line(rng.IntN(1000), n) + "\n")
		}
		n++
	}
	got, st := readAll(t, Config{Workers: 4}, strings.NewReader(log.String()))
	if int64(len(got))+st.Malformed != int64(n) || st.Lines != int64(n) {
		t.Fatalf("%d entries + %d malformed of %d lines (stats %d)", len(got), st.Malformed, n, st.Lines)
	}
	if st.Backwards != 0 {
		t.Errorf("Backwards = %d, want 0: lines came out of order", st.Backwards)
	}
}

func TestOpenUnknownFormat(t *testing.T) {
	if _, err := Open(strings.NewReader("\n\nnot a log line\n"), Config{}); err == nil {
		t.Error("Open of an unknown format = nil error")
	}
}

// endless yields n bytes of 'x' and then a line, without holding them.
type endless struct{ n int }

func (e *endless) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return copy(p, "\n"+line(1, 1)+"\n"), io.EOF
	}
	k := min(len(p), e.n)
	for i := range k {
		p[i] = 'x'
	}
	e.n -= k
	return k, nil
}

// TestStreamHugeLineBounded feeds a line of 256 MiB: it is counted
// malformed, the line after it read, and the memory the reader allocates
// stays within a few chunks, not the line's size.
func TestStreamHugeLineBounded(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := Open(&endless{n: 256 << 20}, Config{}); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("Open, detecting the format of a huge first line = %v, want ErrUnknownFormat", err)
	}
	got, st := readAll(t, Config{Workers: 2, Format: CombinedFormat}, &endless{n: 256 << 20})
	runtime.ReadMemStats(&after)
	if fmt.Sprint(got) != "[0:2]" || st.Malformed != 1 || st.Samples[0].Line != 1 {
		t.Errorf("entries %v, malformed %d (%+v); want [0:2], 1 on line 1", got, st.Malformed, st.Samples)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
		t.Errorf("reading a 256 MiB line allocated %d MiB, want under 32 MiB", alloc>>20)
	}
}

// FuzzStream reads arbitrary bytes as a log, with a small line cap:
// never a panic, every line accounted for.
func FuzzStream(f *testing.F) {
	f.Add([]byte(line(1, 1) + "\n" + line(2, 2)))
	f.Add([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"))
	f.Add([]byte("{\"ts\":1}\n\n\r\n" + strings.Repeat("y", 300)))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Open(bytes.NewReader(data), Config{MaxLine: 128, Workers: 2})
		if err != nil {
			return // a broken gzip header, or a format not told
		}
		r := NewReader([]*Stream{s}, []string{"fuzz"})
		defer r.Close()
		n := int64(0)
		for e := r.Next(); e != nil; e = r.Next() {
			n++
		}
		if n+r.Stats.Malformed > r.Stats.Lines {
			t.Fatalf("%d entries and %d malformed of %d lines", n, r.Stats.Malformed, r.Stats.Lines)
		}
	})
}
