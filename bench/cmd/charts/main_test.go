package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/bench/internal/results"
)

// testSpec charts the fixture testdata/memory.txt.
var testSpec = spec{
	name: "test", title: "T", unit: "ns/op",
	groups: []label{
		{"Memory/keys=hot/traffic=admit/run=serial", "serial"},
		{"Memory/keys=hot/traffic=admit/run=parallel", "parallel"},
	},
	series: []impl{ours("sluice-gcra", "sluice"), peer("x-time-rate", "x"), peer("sethvargo", "s")},
	notes:  []string{unlikeNote},
}

// TestBuild checks the bars built from small results: medians per
// implementation and scenario, † on a peer that admitted less, the
// stacked Redis CPU of the service comparison, and the caption.
func TestBuild(t *testing.T) {
	serviceSpec := spec{
		unit: results.ServerMicrosPerOp, stack: results.RedisMicrosPerOp,
		groups: []label{{"grpc-keys", "keys"}},
		series: []impl{ours("sm", "memory"), peer("rl", "envoy")},
	}
	for _, tc := range []struct {
		file    string
		spec    spec
		want    []series
		caption []string
	}{{
		file: "testdata/memory.txt", spec: testSpec,
		want: []series{
			{label: "sluice", ours: true, values: []float64{42, 65}, unlike: []bool{false, false}},
			{label: "x", values: []float64{85, 155}, unlike: []bool{false, false}},
			{label: "s", values: []float64{21, 95}, unlike: []bool{true, false}},
		},
		caption: []string{"source: testdata/memory.txt", unlikeNote},
	}, {
		file: "testdata/service.jsonl", spec: serviceSpec,
		want: []series{
			{label: "memory", ours: true, values: []float64{25}, stacked: []float64{0.1}, unlike: []bool{false}},
			{label: "envoy", values: []float64{100}, stacked: []float64{25}, unlike: []bool{false}},
		},
		caption: []string{"source: testdata/service.jsonl"},
	}} {
		c := buildFile(t, tc.spec, tc.file)
		for i, want := range tc.want {
			if got := c.series[i]; !sameSeries(got, want) {
				t.Errorf("build(%s).series[%d] = %+v, want %+v", tc.file, i, got, want)
			}
		}
		if !slices.Equal(c.caption, tc.caption) {
			t.Errorf("build(%s).caption = %q, want %q", tc.file, c.caption, tc.caption)
		}
	}
}

// TestBuildMissing checks that a scenario or implementation missing from
// the results is an error, not a bar of height zero.
func TestBuildMissing(t *testing.T) {
	tab, err := results.Load("testdata/memory.txt")
	if err != nil {
		t.Fatal(err)
	}
	s := testSpec
	s.series = append(slices.Clone(s.series), peer("ulule", "u"))
	if _, err := build(s, tab, "memory.txt"); err == nil || !strings.Contains(err.Error(), "ulule") {
		t.Errorf("build(spec with ulule) = %v, want an error naming ulule", err)
	}
}

// TestRender checks that a chart is SVG with its title, labels and caption,
// and that drawing it twice gives the same bytes.
func TestRender(t *testing.T) {
	c := buildFile(t, testSpec, "testdata/memory.txt")
	var a, b bytes.Buffer
	if err := render(c, &a); err != nil {
		t.Fatalf("render = %v", err)
	}
	if err := render(c, &b); err != nil {
		t.Fatalf("render = %v", err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Errorf("render gave different bytes for the same chart")
	}
	for _, want := range []string{"<svg", ">T<", ">serial<", ">sluice<", ">42<", ">†<", ">source: testdata/memory.txt<"} {
		if !strings.Contains(a.String(), want) {
			t.Errorf("render output lacks %q", want)
		}
	}
}

// TestCharts draws the headline charts from the committed results and
// checks them against docs/charts: run go generate in bench/ when the
// results or this command change.
func TestCharts(t *testing.T) {
	out := t.TempDir()
	if err := run([]string{"-root", "../../..", "-out", out}, io.Discard); err != nil {
		t.Fatalf("run = %v", err)
	}
	for _, s := range specs {
		if s.source == "memcached" {
			continue // no results committed
		}
		got, err := os.ReadFile(filepath.Join(out, s.name+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("../../../docs/charts", s.name+".svg"))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("docs/charts/%s.svg is not what charts draws (%v): run go generate in bench/", s.name, err)
		}
	}
}

func TestRunErrors(t *testing.T) {
	out := t.TempDir()
	for _, args := range [][]string{
		{"-out", out, "-memory", "no-such-file.txt"},
		{"-out", out, "extra"},
	} {
		if err := run(append([]string{"-root", "../../.."}, args...), io.Discard); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}

func TestShort(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{{0, "0"}, {65.54, "65.5"}, {648, "648"}, {88746.5, "88.7k"}, {200000, "200k"}} {
		if got := short(tc.v); got != tc.want {
			t.Errorf("short(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// buildFile builds the chart of s from the results in file.
func buildFile(t *testing.T, s spec, file string) *chart {
	t.Helper()
	tab, err := results.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	c, err := build(s, tab, file)
	if err != nil {
		t.Fatalf("build(%s) = %v", file, err)
	}
	return c
}

// sameSeries reports whether a and b are equal, values within 1e-9.
func sameSeries(a, b series) bool {
	near := func(x, y float64) bool { return x-y < 1e-9 && y-x < 1e-9 }
	return a.label == b.label && a.ours == b.ours &&
		slices.EqualFunc(a.values, b.values, near) &&
		slices.EqualFunc(a.stacked, b.stacked, near) &&
		slices.Equal(a.unlike, b.unlike)
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		min, max float64
		want     []string
	}{
		{0, 26.8, []string{"0", "5", "10", "15", "20", "25"}},
		{0, 2260, []string{"0", "500", "1000", "1500", "2000"}},
		{0, 201850, []string{"0", "50k", "100k", "150k", "200k"}},
		{0, 0.9, []string{"0", "0.2", "0.4", "0.6", "0.8"}},
		{0, 0, []string{"0"}},
	} {
		var got []string
		for _, tick := range (tickMarker{}).Ticks(tc.min, tc.max) {
			got = append(got, tick.Label)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Ticks(%v, %v) = %q, want %q", tc.min, tc.max, got, tc.want)
		}
	}
}
