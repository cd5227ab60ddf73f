package results

import (
	"os"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct{ name, scenario, impl string }{
		{"BenchmarkMemory/keys=hot/impl=sluice-gcra/run=serial-2", "Memory/keys=hot/run=serial", "sluice-gcra"},
		{"BenchmarkMemoryBytes/keys=1M/impl=ulule-8", "MemoryBytes/keys=1M", "ulule"},
		{"BenchmarkClock/time.Now", "Clock/time.Now", ""},
	} {
		sc, impl := Split([]byte(tc.name))
		if sc != tc.scenario || impl != tc.impl {
			t.Errorf("Split(%q) = %q, %q, want %q, %q", tc.name, sc, impl, tc.scenario, tc.impl)
		}
	}
}

// TestRead reads a small raw benchmark output and checks the medians,
// the sample counts and the order in which scenarios and implementations
// are listed.
func TestRead(t *testing.T) {
	tab := readFile(t, "testdata/raw.txt")
	hot := "Memory/keys=hot/traffic=admit/run=serial"
	for _, tc := range []struct {
		key    Key
		n      int
		median float64
	}{
		{Key{hot, "sluice-gcra", "ns/op"}, 3, 42},
		{Key{hot, "x-time-rate", "ns/op"}, 3, 84},
		{Key{hot, "sethvargo", "admitted/op"}, 3, 0.011},
		{Key{"MemoryBytes/keys=1M", "x-time-rate", "B/key"}, 1, 120},
		{Key{"Clock/time.Now", "", "ns/op"}, 1, 50},
		{Key{hot, "ulule", "ns/op"}, 0, 0},
	} {
		s := tab.Summary(tc.key)
		if n := tab.Len(tc.key); n != tc.n || s.Median != tc.median || s.OK != (tc.n > 0) {
			t.Errorf("Len, Summary(%v) = %d, %v, want %d samples of median %v", tc.key, n, s, tc.n, tc.median)
		}
	}
	for _, tc := range []struct {
		name      string
		got, want []string
	}{
		{"Scenarios", tab.Scenarios, []string{hot, "MemoryBytes/keys=1M"}},
		{"Impls", tab.Impls, []string{"sluice-gcra", "x-time-rate", "sethvargo"}},
		{"Others", tab.Others, []string{"Clock/time.Now"}},
	} {
		if strings.Join(tc.got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {65.54, "65.5"}, {8.77e-05, "8.77e-05"}, {153.6, "154"}, {141356.5, "141356"},
	} {
		if got := Format(tc.v); got != tc.want {
			t.Errorf("Format(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// readFile reads a raw benchmark output into a new table.
func readFile(t *testing.T, name string) *Table {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab := New()
	if err := tab.Read(f, name); err != nil {
		t.Fatalf("Read(%s) = %v", name, err)
	}
	return tab
}

func TestSameWork(t *testing.T) {
	s := func(v float64) Summary { return Summary{Median: v, OK: true} }
	for _, tc := range []struct {
		a, b Summary
		want bool
	}{
		{s(1), s(1), true},
		{s(1), s(0.96), true},
		{s(1), s(0.94), false},
		{s(6.6e-5), s(1.1e-4), true}, // deny-heavy: both admit next to nothing
		{s(1), s(8.8e-5), false},     // sethvargo's under-refill
		{s(1), Summary{}, true},      // no admitted/op: assumed alike
	} {
		if got := SameWork(tc.a, tc.b); got != tc.want {
			t.Errorf("SameWork(%v, %v) = %v, want %v", tc.a.Median, tc.b.Median, got, tc.want)
		}
	}
}
