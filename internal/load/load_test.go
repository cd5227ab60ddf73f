package load

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testing/rlstest"
	"github.com/sluicehq/sluice/server/envoyrls"
	"github.com/sluicehq/sluice/server/httpapi"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/store/memory"
)

const cfgYAML = `rules:
  - name: api
    limits: ["100/h"]
  - domain: edge
    descriptors:
      - key: ip
        rate_limit: {unit: hour, requests_per_unit: 100}
`

// servers starts the HTTP API (with Envoy's /json) and Envoy's gRPC API of one configuration
// on loopback listeners, and returns their targets.
func servers(t *testing.T) (httpTarget, grpcTarget string) {
	t.Helper()
	c, err := config.Parse("load.yaml", []byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New(memory.Config{})
	t.Cleanup(func() { st.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := rules.New(rules.Config{Store: st, Rules: c.Rules, Domains: c.Domains, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(httpapi.Config{Engine: eng, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	rls, err := envoyrls.New(envoyrls.Config{Engine: func() *rules.Engine { return eng }, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/json", envoyrls.JSONHandler(rls))
	mux.Handle("/", api)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs.URL, "grpc://" + rlstest.Listen(t, rls)
}

func TestRun(t *testing.T) {
	httpURL, grpcURL := servers(t)
	tests := []struct {
		name string
		cfg  Config
		// allowed is what the limit of 100 per hour per key admits.
		allowed int64
	}{
		{"grpc hot key", Config{Target: grpcURL, Domain: "edge", Descriptors: []string{"ip={key}"}, KeyPrefix: "g", Requests: 300}, 100},
		{"grpc 10 keys", Config{Target: grpcURL, Domain: "edge", Descriptors: []string{"ip={key}"}, KeyPrefix: "h", Keys: 10, Requests: 500}, 500},
		{"grpc two descriptors", Config{Target: grpcURL, Domain: "edge", Descriptors: []string{"ip=a{key}", "ip=b{key}"}, Requests: 150}, 100},
		{"http rule", Config{Target: httpURL, Rule: "api", KeyPrefix: "r", Requests: 300, Concurrency: 8, Conns: 2}, 100},
		{"http descriptors", Config{Target: httpURL, Domain: "edge", Descriptors: []string{"ip=x{key}"}, Requests: 250, Hits: 2}, 50},
		{"envoy json", Config{Target: httpURL + "/json", Domain: "edge", Descriptors: []string{"ip=j{key}"}, Requests: 250, Hits: 2}, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Run(context.Background(), tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r.Errors != 0 || r.Requests != tt.cfg.Requests || r.Allowed != tt.allowed || r.Allowed+r.OverLimit != r.Requests {
				t.Errorf("Run = %d requests, %d allowed, %d over, %d errors (%v); want %d, %d allowed, no errors",
					r.Requests, r.Allowed, r.OverLimit, r.Errors, r.FirstError, tt.cfg.Requests, tt.allowed)
			}
			if want := r.Requests * int64(len(tt.cfg.Descriptors)); len(tt.cfg.Descriptors) > 0 && r.Decisions != want {
				t.Errorf("Decisions = %d, want %d", r.Decisions, want)
			}
			if r.Latency.TotalCount() != r.Requests || r.Quantile(0.5) <= 0 || r.Quantile(0.999) < r.Quantile(0.5) {
				t.Errorf("latency: %d samples, p50 %v, p999 %v", r.Latency.TotalCount(), r.Quantile(0.5), r.Quantile(0.999))
			}
		})
	}
}

// TestRunErrors checks that errors of the server are counted, not fatal.
func TestRunErrors(t *testing.T) {
	httpURL, _ := servers(t)
	r, err := Run(context.Background(), Config{Target: httpURL, Rule: "nope", Requests: 20, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 20 || r.Requests != 0 || r.FirstError == nil || !strings.Contains(r.FirstError.Error(), "400") {
		t.Errorf("Run(unknown rule) = %d errors, %d answered, first %v; want 20 errors with the 400", r.Errors, r.Requests, r.FirstError)
	}
}

// TestProgress checks the line written each second.
func TestProgress(t *testing.T) {
	_, grpcURL := servers(t)
	var out bytes.Buffer
	r, err := Run(context.Background(), Config{Target: grpcURL, Domain: "edge", Descriptors: []string{"ip={key}"}, Keys: 1000,
		Concurrency: 1, Conns: 1, Duration: 1500 * time.Millisecond, Progress: &out})
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) < 1 || !strings.Contains(lines[0], "req/s") || r.Requests == 0 {
		t.Errorf("progress = %q after %d requests, want a line per second", out.String(), r.Requests)
	}
	// A run ended by its duration cuts its last requests short: they are
	// not errors.
	if r.Errors != 0 {
		t.Errorf("Run ended by its duration: %d errors (%v), want 0", r.Errors, r.FirstError)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"not loopback", Config{Target: "grpc://192.0.2.1:8081", Domain: "d", Descriptors: []string{"a=b"}}, "not a loopback"},
		{"not loopback v6", Config{Target: "http://[2001:db8::1]:80", Rule: "r"}, "not a loopback"},
		{"no target", Config{Domain: "d", Descriptors: []string{"a=b"}}, "want grpc://host:port"},
		{"scheme", Config{Target: "ftp://127.0.0.1:1", Rule: "r"}, "scheme"},
		{"nothing to ask", Config{Target: "http://127.0.0.1:1"}, "give a domain"},
		{"both", Config{Target: "http://127.0.0.1:1", Rule: "r", Domain: "d", Descriptors: []string{"a=b"}}, "not both"},
		{"grpc rule", Config{Target: "grpc://127.0.0.1:1", Rule: "r"}, "needs a domain"},
		{"no descriptors", Config{Target: "grpc://127.0.0.1:1", Domain: "d"}, "at least one descriptor"},
		{"json rule", Config{Target: "http://127.0.0.1:1/json", Rule: "r"}, "needs a domain"},
		{"http path", Config{Target: "http://127.0.0.1:1/v2", Rule: "r"}, "target path"},
		{"bad descriptor", Config{Target: "grpc://127.0.0.1:1", Domain: "d", Descriptors: []string{"ab"}}, "want key=value"},
		{"negative", Config{Target: "grpc://127.0.0.1:1", Domain: "d", Descriptors: []string{"a=b"}, Concurrency: -1}, "negative"},
		{"negative rate", Config{Target: "grpc://127.0.0.1:1", Domain: "d", Descriptors: []string{"a=b"}, Rate: -1}, "negative"},
		{"NaN rate", Config{Target: "grpc://127.0.0.1:1", Domain: "d", Descriptors: []string{"a=b"}, Rate: math.NaN()}, "want at most 1000000"},
		{"rate too high", Config{Target: "grpc://127.0.0.1:1", Domain: "d", Descriptors: []string{"a=b"}, Rate: 2e6}, "want at most 1000000"},
	}
	for _, tt := range tests {
		_, err := Run(context.Background(), tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Run error = %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
	if _, err := Run(context.Background(), tests[0].cfg); !errors.Is(err, ErrNotLoopback) {
		t.Errorf("Run(non-loopback) error = %v, want ErrNotLoopback", err)
	}
}
