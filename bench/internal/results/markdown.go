package results

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// mediansSuffix ends the heading of each median table bench/cmd/ratio
// prints: "### ns/op: median ±95% confidence interval".
const mediansSuffix = ": median ±95% confidence interval"

// ReadMedians adds the median tables of a report bench/cmd/ratio printed
// (what run.sh shows), for results whose raw output was not kept: each
// median, as printed, becomes one sample. A table whose first column is
// "scenario" has one column per implementation, in the unit its heading
// names; one whose first column is "benchmark" lists benchmarks without an
// implementation, one column per unit. The ratio tables and other lines are
// skipped.
func (t *Table) ReadMedians(r io.Reader, name string) error {
	var unit string     // the unit of the table being read, if any
	var header []string // its columns, once read
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "#"):
			heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
			unit, _ = strings.CutSuffix(heading, mediansSuffix)
			if unit == heading {
				unit = ""
			}
			header = nil
		case unit == "" || !strings.HasPrefix(line, "|"):
			if line == "" && header != nil {
				unit, header = "", nil // a table ends at a blank line
			}
		case header == nil:
			header = cells(line)
		case strings.HasPrefix(line, "| ---"):
		default:
			if err := t.addRow(header, cells(line), unit); err != nil {
				return fmt.Errorf("%s:%d: %w", name, n, err)
			}
		}
	}
	return sc.Err()
}

// addRow adds the medians of one row of a median table in unit.
func (t *Table) addRow(header, row []string, unit string) error {
	if len(row) != len(header) {
		return fmt.Errorf("%d cells under %d columns", len(row), len(header))
	}
	for i := 1; i < len(row); i++ {
		if row[i] == "" {
			continue
		}
		v, err := parseMedian(row[i])
		if err != nil {
			return err
		}
		switch header[0] {
		case "scenario":
			t.Add(Key{Scenario: row[0], Impl: header[i], Unit: unit}, v)
		case "benchmark":
			t.Add(Key{Scenario: row[0], Unit: header[i]}, v)
		default:
			return fmt.Errorf("median table whose first column is %q", header[0])
		}
	}
	return nil
}

// cells splits a Markdown table row into its trimmed cells.
func cells(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	cs := strings.Split(line, "|")
	for i := range cs {
		cs[i] = strings.TrimSpace(cs[i])
	}
	return cs
}

// parseMedian parses a cell such as "65.5 ±8%" or "8.77e-05 ±∞".
func parseMedian(cell string) (float64, error) {
	s, _, _ := strings.Cut(cell, "±")
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, fmt.Errorf("median %q: %w", cell, err)
	}
	return v, nil
}
