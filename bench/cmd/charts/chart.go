package main

import (
	"fmt"

	"github.com/sluicehq/sluice/bench/internal/results"
)

// chart is what one chart shows: a bar per implementation in each group
// (scenario), and the caption's lines under it.
type chart struct {
	title, xlabel, ylabel string
	groups                []string // labels along the X axis
	series                []series
	caption               []string
}

// series is one implementation's bars, one per group.
type series struct {
	label   string
	ours    bool
	values  []float64 // the bars' heights
	stacked []float64 // heights stacked on values, or nil
	unlike  []bool    // admitted a different amount than sluice (marked †)
}

// build gathers from t the medians that s charts, and captions the chart
// with source, the file t was read from. Every implementation must have a
// result in every scenario: a missing bar would read as zero.
func build(s spec, t *results.Table, source string) (*chart, error) {
	c := &chart{title: s.title, xlabel: s.xlabel, ylabel: s.ylabel}
	for _, g := range s.groups {
		c.groups = append(c.groups, g.text)
	}
	for _, im := range s.series {
		se := series{label: im.text, ours: im.ours}
		for _, g := range s.groups {
			v, err := median(t, results.Key{Scenario: g.key, Impl: im.key, Unit: s.unit}, source)
			if err != nil {
				return nil, err
			}
			se.values = append(se.values, v)
			if s.stack != "" {
				v, err := median(t, results.Key{Scenario: g.key, Impl: im.key, Unit: s.stack}, source)
				if err != nil {
					return nil, err
				}
				se.stacked = append(se.stacked, v)
			}
			se.unlike = append(se.unlike, !im.ours && !sameWork(t, s, g.key, im.key))
		}
		c.series = append(c.series, se)
	}
	c.caption = append([]string{"source: " + source}, s.notes...)
	return c, nil
}

// median returns the median of the samples of k in t, read from source.
func median(t *results.Table, k results.Key, source string) (float64, error) {
	sum := t.Summary(k)
	if !sum.OK {
		return 0, fmt.Errorf("%s: no %s for %s in %s", source, k.Unit, k.Impl, k.Scenario)
	}
	return sum.Median, nil
}

// sameWork reports whether the peer admitted as much as sluice's first
// implementation in s, in scenario, by the rule of the ratio tables.
func sameWork(t *results.Table, s spec, scenario, peer string) bool {
	for _, im := range s.series {
		if im.ours {
			mine := t.Summary(results.Key{Scenario: scenario, Impl: im.key, Unit: results.Admitted})
			theirs := t.Summary(results.Key{Scenario: scenario, Impl: peer, Unit: results.Admitted})
			return results.SameWork(mine, theirs)
		}
	}
	return true
}
