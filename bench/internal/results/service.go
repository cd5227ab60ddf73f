package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Units of the samples ReadService adds.
const (
	DecisionsPerSecond = "decisions/s"
	ServerMicrosPerOp  = "server-µs/op" // the server's CPU time per request
	RedisMicrosPerOp   = "redis-µs/op"  // Redis's CPU time per request
)

// tick is the length of the clock ticks in which the service comparison
// counts CPU time: /proc/PID/stat's utime and stime, in USER_HZ (100/s).
const tick = 10_000 // µs

// serviceRun is one line of the service comparison's reports: a run of
// sluice bench against one server (impl) in one scenario (scen), with the
// CPU the server and Redis spent during it, in clock ticks. The first
// comparison did not record CPU.
type serviceRun struct {
	Scenario   string   `json:"scen"`
	Impl       string   `json:"impl"`
	CPUTicks   *float64 `json:"cpu_ticks"`
	RedisTicks *float64 `json:"redis_ticks"`
	Report     struct {
		Requests           float64 `json:"requests"`
		DecisionsPerSecond float64 `json:"decisions_per_second"`
	} `json:"r"`
}

// ReadService adds the runs of a service comparison (docs/service.md),
// JSON lines of one run each, named name in errors. Each run adds one
// sample of decisions/s and, when it recorded them, of the server's and
// Redis's CPU time per request in µs, under its scenario and
// implementation.
func (t *Table) ReadService(r io.Reader, name string) error {
	dec := json.NewDecoder(r)
	for n := 1; ; n++ {
		var run serviceRun
		err := dec.Decode(&run)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: run %d: %w", name, n, err)
		}
		if run.Scenario == "" || run.Impl == "" || run.Report.Requests <= 0 {
			return fmt.Errorf("%s: run %d: no scenario, implementation or requests", name, n)
		}
		t.addRun(run)
	}
}

// addRun adds the samples of one run.
func (t *Table) addRun(run serviceRun) {
	key := func(unit string) Key { return Key{Scenario: run.Scenario, Impl: run.Impl, Unit: unit} }
	t.Add(key(DecisionsPerSecond), run.Report.DecisionsPerSecond)
	if run.CPUTicks != nil {
		t.Add(key(ServerMicrosPerOp), *run.CPUTicks*tick/run.Report.Requests)
	}
	if run.RedisTicks != nil {
		t.Add(key(RedisMicrosPerOp), *run.RedisTicks*tick/run.Report.Requests)
	}
}
