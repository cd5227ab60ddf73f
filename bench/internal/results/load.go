package results

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// Load reads one results file into a new table: the runs of a service
// comparison if its name ends in .jsonl; otherwise raw Go benchmark
// output or, in a file that holds no raw result (run.sh's report kept in
// place of the raw output), the median tables of bench/cmd/ratio.
func Load(path string) (*Table, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t := New()
	switch {
	case filepath.Ext(path) == ".jsonl":
		err = t.ReadService(bytes.NewReader(data), path)
	default:
		err = t.Read(bytes.NewReader(data), path)
		if err == nil && t.empty() {
			err = t.ReadMedians(bytes.NewReader(data), path)
		}
	}
	if err != nil {
		return nil, err
	}
	if t.empty() {
		return nil, fmt.Errorf("%s: no results", path)
	}
	return t, nil
}

// empty reports whether t holds no sample.
func (t *Table) empty() bool { return len(t.samples) == 0 }
