package topkeys

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// checkSorted fails unless the slots are sorted by count, each under
// its key's hash, and no key is in two.
func checkSorted(t *testing.T, s *Sketch) {
	t.Helper()
	for i := 1; i < len(s.counts); i++ {
		if s.counts[i-1] > s.counts[i] {
			t.Fatalf("slots not sorted at %d: %v", i, s.counts)
		}
	}
	seen := map[string]bool{}
	for i, c := range s.counts {
		if c == 0 {
			continue
		}
		if maphash.String(s.seed, s.keys[i]) != s.hashes[i] || seen[s.keys[i]] {
			t.Fatalf("slot %d holds %q under another hash, or twice: %v", i, s.keys[i], s.keys)
		}
		seen[s.keys[i]] = true
	}
}

func TestSketchExact(t *testing.T) {
	tests := []struct {
		name   string
		k      int
		stream string
		want   []Count
	}{
		{"empty", 3, "", []Count{}},
		{"one key", 3, "aaaa", []Count{{"a", 4, 0}}},
		{"fits", 3, "abcabca", []Count{{"a", 3, 0}, {"b", 2, 0}, {"c", 2, 0}}},
		{"evicts the lightest", 2, "aaabc", []Count{{"a", 3, 0}, {"c", 2, 1}}},
		{"one counter", 1, "aab", []Count{{"b", 3, 2}}},
	}
	for _, tt := range tests {
		s := NewSketch(tt.k)
		for _, c := range tt.stream {
			s.Add(string(c))
			checkSorted(t, s)
		}
		if got := s.Top(10); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Top(%q) = %v, want %v", tt.name, tt.stream, got, tt.want)
		}
	}
}

// TestSketchGuarantees checks Space-Saving's bounds on skewed random
// streams: every key heavier than n/k is kept, and each kept key's count
// is between Count-Err and Count, with Err at most n/k.
func TestSketchGuarantees(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		const k, n = 16, 5000
		s := NewSketch(k)
		exact := map[string]uint64{}
		zipf := rand.NewZipf(r, 1.3, 1, 500)
		for range n {
			key := strconv.FormatUint(zipf.Uint64(), 10)
			exact[key]++
			s.Add(key)
		}
		checkSorted(t, s)
		kept := map[string]Count{}
		for _, c := range s.Top(k) {
			kept[c.Key] = c
			if ex := exact[c.Key]; c.Count < ex || c.Count-c.Err > ex || c.Err > n/k {
				t.Fatalf("seed %d: %+v, exact count %d: outside [Count-Err, Count] or Err > n/k", seed, c, ex)
			}
		}
		for key, ex := range exact {
			if _, ok := kept[key]; ex > n/k && !ok {
				t.Fatalf("seed %d: key %q counted %d > n/k = %d times is missing", seed, key, ex, n/k)
			}
		}
	}
}

// TestSketchFlood sends a million distinct keys and one heavy key: the
// sketch stays at k entries and still ranks the heavy key first.
func TestSketchFlood(t *testing.T) {
	const k = 32
	s := NewSketch(k)
	for i := range 1_000_000 {
		s.Add("flood-" + strconv.Itoa(i))
		if i%10 == 0 {
			s.Add("heavy")
		}
	}
	if len(s.hashes) != k || len(s.counts) != k || len(s.keys) != k || len(s.errs) != k {
		t.Errorf("after the flood: %d, %d, %d, %d slots; want %d", len(s.hashes), len(s.counts), len(s.keys), len(s.errs), k)
	}
	if top := s.Top(1); len(top) != 1 || top[0].Key != "heavy" || top[0].Count-top[0].Err > 100_000 {
		t.Errorf("Top(1) = %v, want heavy with a lower bound of at most 100000", top)
	}
	s.Reset()
	if got := s.Top(1); len(got) != 0 || s.Total() != 0 {
		t.Errorf("after Reset: Top = %v, Total = %d; want nothing", got, s.Total())
	}
}

func TestWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := NewWindow(WindowConfig{Buckets: 3, Width: 10 * time.Second, Shards: 2, K: 4})
	if w.Span() != 30*time.Second {
		t.Fatalf("Span() = %v, want 30s", w.Span())
	}
	add := func(at time.Duration, key string, n int) {
		for range n {
			w.Add(t0.Add(at), key)
		}
	}
	add(0, "a", 5)
	add(5*time.Second, "b", 3)
	add(15*time.Second, "b", 4)
	add(25*time.Second, "c", 1)
	tests := []struct {
		at    time.Duration
		want  string
		total uint64
	}{
		{9 * time.Second, "[{a 5 0} {b 3 0}]", 8},
		{29 * time.Second, "[{b 7 0} {a 5 0} {c 1 0}]", 13},
		{30 * time.Second, "[{b 4 0} {c 1 0}]", 5}, // the first bucket left the window
		{45 * time.Second, "[{c 1 0}]", 1},         // so did the second
		{90 * time.Second, "[]", 0},                // and every bucket
		{-time.Second, "[]", 0},                    // before anything was counted
	}
	for _, tt := range tests {
		got, total := w.Top(t0.Add(tt.at), 10)
		if fmt.Sprint(got) != tt.want || total != tt.total {
			t.Errorf("Top(t0+%v) = %v, %d; want %s, %d", tt.at, got, total, tt.want, tt.total)
		}
	}
	// A bucket that comes round again starts afresh; a late add to the
	// bucket it replaced is dropped.
	add(30*time.Second, "d", 2)
	add(0, "late", 9)
	if got, _ := w.Top(t0.Add(30*time.Second), 10); fmt.Sprint(got) != "[{b 4 0} {d 2 0} {c 1 0}]" {
		t.Errorf("after the first bucket came round: Top = %v", got)
	}
}

// TestWindowConcurrent adds from several goroutines while reading: run
// with -race. Every add is counted exactly when the keys fit.
func TestWindowConcurrent(t *testing.T) {
	w := NewWindow(WindowConfig{})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				w.Add(now, "k"+strconv.Itoa((g+i)%8))
				if i%500 == 0 {
					w.Top(now, 3)
				}
			}
		})
	}
	wg.Wait()
	top, total := w.Top(now, 8)
	if total != 8000 || len(top) != 8 || top[0].Count != 1000 || top[7].Count != 1000 {
		t.Errorf("Top = %v, total %d; want 8 keys of 1000, total 8000", top, total)
	}
}

func BenchmarkSketchAdd(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "203.0.113." + strconv.Itoa(i)
	}
	b.Run("heavy", func(b *testing.B) { // the keys fit: every add is a hit
		s := NewSketch(32)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			s.Add(keys[i%16])
		}
	})
	b.Run("rotating", func(b *testing.B) { // every add evicts
		s := NewSketch(32)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			s.Add(keys[i%len(keys)])
		}
	})
}

func BenchmarkWindowAdd(b *testing.B) {
	w := NewWindow(WindowConfig{})
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "203.0.113." + strconv.Itoa(i)
	}
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			w.Add(now, keys[i%len(keys)])
		}
	})
}
