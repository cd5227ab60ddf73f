package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// check posts a check of rule api for key to h, with headers as name,
// value pairs, and returns the status.
func check(t *testing.T, h http.Handler, key string, headers ...string) int {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(`{"rule":"api","key":"`+key+`"}`))
	r.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// TestTelemetrySpans checks the spans of a decision: "sluice.check",
// continuing the client's trace, with the store call under it.
func TestTelemetrySpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	s := newServiceWith(t, serviceConfig, Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	if code := check(t, s.Handler(), "203.0.113.7", "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01"); code != http.StatusOK {
		t.Fatalf("check = %d", code)
	}
	spans := rec.Ended()
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		byName[sp.Name()] = sp
	}
	chk, ok := byName["sluice.check"]
	if !ok {
		t.Fatalf("spans %v, want sluice.check", names(spans))
	}
	if got := chk.SpanContext().TraceID().String(); got != traceID {
		t.Errorf("sluice.check in trace %s, want the client's %s", got, traceID)
	}
	for _, want := range []attribute.KeyValue{
		attribute.Bool("sluice.allowed", true), attribute.String("sluice.domain", "api"),
		attribute.Int("sluice.descriptors", 1), attribute.String("sluice.op", "take"),
	} {
		if !hasAttr(chk.Attributes(), want) {
			t.Errorf("sluice.check attributes %v, want %v among them", chk.Attributes(), want)
		}
	}
	var store sdktrace.ReadOnlySpan
	for _, sp := range spans {
		if strings.HasPrefix(sp.Name(), "sluice.store.") {
			store = sp
		}
	}
	if store == nil || store.Parent().SpanID() != chk.SpanContext().SpanID() || !hasAttr(store.Attributes(), attribute.String("sluice.rule", "api")) {
		t.Errorf("store span %v, want one under sluice.check for rule api; spans %v", store, names(spans))
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, sp := range spans {
		out = append(out, sp.Name())
	}
	return out
}

func hasAttr(attrs []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, a := range attrs {
		if a == want {
			return true
		}
	}
	return false
}

// collector is an OTLP/HTTP receiver on loopback: what it was sent.
type collector struct {
	mu      sync.Mutex
	spans   []string
	metrics []string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch r.URL.Path {
	case "/v1/traces":
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					c.spans = append(c.spans, sp.Name)
				}
			}
		}
	case "/v1/metrics":
		var req colmetrics.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					c.metrics = append(c.metrics, m.Name)
				}
			}
		}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

// TestTelemetryOTLP sends a service's traces and metrics to a collector
// on loopback over OTLP/HTTP, as the telemetry section configures: what
// it holds is sent at the latest when the service closes.
func TestTelemetryOTLP(t *testing.T) {
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	text := serviceConfig + "telemetry: {endpoint: \"" + strings.TrimPrefix(srv.URL, "http://") + "\", insecure: true, interval: 1h}\n"
	s := newServiceWith(t, text, Options{Logger: slog.New(slog.DiscardHandler)})
	for range 3 {
		check(t, s.Handler(), "203.0.113.8")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close (flushing telemetry): %v", err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if !strings.Contains(strings.Join(col.spans, " "), "sluice.check") {
		t.Errorf("the collector got spans %v, want sluice.check", col.spans)
	}
	if !slices.Contains(col.metrics, "sluice_decisions_total") {
		t.Errorf("the collector got metrics %v, want sluice_decisions_total", col.metrics)
	}
}

// TestTelemetryOff checks that without a telemetry section nothing is
// traced: the engine and the stores hold no tracer.
func TestTelemetryOff(t *testing.T) {
	s := newServiceWith(t, serviceConfig, Options{})
	if s.tel.tracer != nil || len(s.tel.shutdown) != 0 {
		t.Fatal("telemetry set up without a telemetry section")
	}
}
