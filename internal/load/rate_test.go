package load

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	tests := []struct {
		rate     float64
		d        time.Duration
		requests int64
		want     int64
	}{
		{200, time.Second, 0, 200},
		{7, time.Second, 0, 7},
		{3, time.Second, 0, 3},
		{2.5, time.Second, 0, 3}, // due at 0, 400ms, 800ms
		{0.5, 3 * time.Second, 0, 2},
		{1000, time.Second, 50, 50},
		{10, time.Second, 50, 10},
		{200, 1500 * time.Millisecond, 0, 300},
		{MaxRate, time.Hour, 0, 3_600_000_000},
		{1, time.Nanosecond, 0, 1},
	}
	for _, tt := range tests {
		s := newSchedule(tt.rate, tt.d, tt.requests)
		if s.n != tt.want {
			t.Errorf("newSchedule(%v, %v, %d).n = %d, want %d", tt.rate, tt.d, tt.requests, s.n, tt.want)
		}
		if tt.requests == 0 && (s.at(s.n-1) >= tt.d || s.at(s.n) < tt.d) {
			t.Errorf("newSchedule(%v, %v): last due at %v, next at %v; want them either side of %v",
				tt.rate, tt.d, s.at(s.n-1), s.at(s.n), tt.d)
		}
	}
	if s := newSchedule(7, time.Second, 0); s.at(7) != time.Second || s.at(1) != 142857143 {
		t.Errorf("newSchedule(7/s).at(1), at(7) = %v, %v; want 142.857143ms, 1s", s.at(1), s.at(7))
	}
}

// TestRunRate runs fixed-rate loads against the real servers: the
// schedule sets exactly how many requests are sent.
func TestRunRate(t *testing.T) {
	httpURL, grpcURL := servers(t)
	tests := []struct {
		name string
		cfg  Config
		// want is the schedule's length, allowed what the limit of 100
		// per hour per key admits of it.
		want, allowed int64
		span          time.Duration
	}{
		{"grpc 200/s for 1s", Config{Target: grpcURL, Domain: "edge", Descriptors: []string{"ip={key}"}, KeyPrefix: "rg", Rate: 200, Duration: time.Second},
			200, 100, time.Second},
		{"http 200/s for 1s, 4 keys", Config{Target: httpURL, Rule: "api", KeyPrefix: "rh", Keys: 4, Rate: 200, Duration: time.Second, Concurrency: 8, Conns: 2},
			200, 200, time.Second},
		{"grpc 400/s, 100 requests", Config{Target: grpcURL, Domain: "edge", Descriptors: []string{"ip={key}"}, KeyPrefix: "rn", Keys: 10, Rate: 400, Requests: 100},
			100, 100, 250 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Run(context.Background(), tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			// On a busy machine requests may still wait for a slot when the
			// run's time is up: missed, never lost. How many is the
			// machine's business, not the test's: no bound on time.
			if r.Scheduled != tt.want || r.Requests+r.Missed != tt.want || r.Requests == 0 || r.Errors != 0 ||
				r.Allowed < tt.allowed-r.Missed || r.Allowed > tt.allowed || r.Allowed+r.OverLimit != r.Requests {
				t.Errorf("Run = %d scheduled, %d answered, %d allowed, %d errors (%v), %d missed; want %d answered or missed, %d allowed, no errors",
					r.Scheduled, r.Requests, r.Allowed, r.Errors, r.FirstError, r.Missed, tt.want, tt.allowed)
			}
			if r.Rate != tt.cfg.Rate || r.Latency.TotalCount() != r.Requests || r.Lag.TotalCount() != r.Requests {
				t.Errorf("Run: rate %v, %d latencies, %d lags; want rate %v, one of each per request", r.Rate, r.Latency.TotalCount(), r.Lag.TotalCount(), tt.cfg.Rate)
			}
			// The run lasts its whole schedule by construction.
			if r.Elapsed < tt.span {
				t.Errorf("Run: elapsed %v, want at least the schedule's %v", r.Elapsed, tt.span)
			}
		})
	}
}

// checkServer answers the HTTP API's check with "allowed", calling
// before first for each request in the order they arrive (0, 1, ...).
func checkServer(t *testing.T, before func(n int64, r *http.Request)) string {
	t.Helper()
	var n atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body first: only then does the server watch the
		// connection, and cancel r.Context() when the client gives up.
		io.Copy(io.Discard, r.Body)
		before(n.Add(1)-1, r)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]bool{"allowed": true})
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestRunRateStall checks that latency runs from a request's intended
// time: the server stalls its first answer for 100 ms, one request in
// flight at most, 100 requests a second. Closed-loop measurement would
// show one slow request; here the requests due during the stall cannot be
// answered before it ends, so each reports at least the rest of the stall
// from its own due time (request k ≥ 100 ms - 10k ms), however slow the
// machine.
func TestRunRateStall(t *testing.T) {
	const stall = 100 * time.Millisecond
	url := checkServer(t, func(n int64, _ *http.Request) {
		if n == 0 {
			time.Sleep(stall)
		}
	})
	r, err := Run(context.Background(), Config{Target: url, Rule: "r", Rate: 100, Requests: 20, Concurrency: 1, Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 20 || r.Errors != 0 || r.Missed != 0 {
		t.Fatalf("Run = %d answered, %d errors (%v), %d missed; want 20 answered", r.Requests, r.Errors, r.FirstError, r.Missed)
	}
	// Requests 0 to 5 are due at 0 to 50 ms and answered after 100 ms.
	// (49 ms: the histogram keeps 3 significant digits.)
	var slow int64
	for _, bar := range r.Latency.Distribution() {
		if bar.From >= 49_000 {
			slow += bar.Count
		}
	}
	if slow < 6 || r.Quantile(1) < stall-time.Millisecond {
		t.Errorf("latency: %d requests at 49 ms or more, max %v; want at least 6, max at least %v", slow, r.Quantile(1), stall)
	}
	// Request 1, due at 10 ms, found the only slot taken until 100 ms.
	if r.Late < 1 || r.Lag.Max() < 49_000 {
		t.Errorf("Run: %d late, lag max %d µs; want at least 1 late and a lag of 50 ms or more", r.Late, r.Lag.Max())
	}
}

// TestRunRateMissed checks that requests still waiting for a slot when
// the run's time is up are reported as missed, not sent nor dropped
// silently: the only slot is held by a request the server never answers,
// until the request's timeout, which comes after the run's end.
func TestRunRateMissed(t *testing.T) {
	release := make(chan struct{})
	url := checkServer(t, func(_ int64, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // before the server's Close
	r, err := Run(context.Background(), Config{Target: url, Rule: "r", Rate: 100, Duration: 200 * time.Millisecond,
		Concurrency: 1, Conns: 1, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Scheduled != 20 || r.Requests != 0 || r.Errors != 1 || r.Missed != 19 || r.Late != 0 {
		t.Errorf("Run = %d scheduled, %d answered, %d errors, %d missed, %d late; want 20, 0, 1 (the timeout), 19, 0",
			r.Scheduled, r.Requests, r.Errors, r.Missed, r.Late)
	}
}

// TestRunRateCancel checks that cancelling the run's context ends a
// fixed-rate run, and that every scheduled request is accounted for.
func TestRunRateCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var answered atomic.Int64
	url := checkServer(t, func(int64, *http.Request) {
		if answered.Add(1) == 10 {
			cancel() // the run ends during its tenth request
		}
	})
	r, err := Run(ctx, Config{Target: url, Rule: "r", Rate: 200, Duration: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Scheduled != 2000 || r.Requests+r.Errors+r.Missed != r.Scheduled || r.Errors != 0 || r.Missed < 1990 {
		t.Errorf("Run cancelled = %d scheduled, %d answered, %d errors (%v), %d missed; want 2000 = answered + missed, at least 1990 missed",
			r.Scheduled, r.Requests, r.Errors, r.FirstError, r.Missed)
	}
}
