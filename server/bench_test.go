package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/cputime"
)

// BenchmarkCheck measures one check of a named rule through the
// service's HTTP API, on 10,000 keys over the memory store, with guard
// lists that pass them: the handler, the engine, the guard and the
// rule's metered store, without a network. telemetry=off is the service
// as it runs by default; traced records every decision's spans (a check
// and its store call) in a tracer provider whose batch goes nowhere: the
// cost of tracing, without that of an exporter's network. CPU per check
// is the process's (cpu-ns/op), steadier than ns/op on a shared machine.
func BenchmarkCheck(b *testing.B) {
	for _, tt := range []struct {
		name string
		tp   trace.TracerProvider
	}{
		{"telemetry=off", nil},
		{"telemetry=traced", sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))},
	} {
		b.Run(tt.name, func(b *testing.B) { benchmarkCheck(b, Options{TracerProvider: tt.tp}) })
	}
}

// discard is a span exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

func benchmarkCheck(b *testing.B, o Options) {
	c, err := config.Parse("b.yaml", []byte("rules:\n  - name: api\n    limits: [\"1000/min\"]\nguard:\n  allow: [192.0.2.10]\n  deny: [198.51.100.0/24]\n"))
	if err != nil {
		b.Fatal(err)
	}
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := NewService(context.Background(), c, o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	h := s.Handler()
	bodies := make([]string, 10_000)
	for i := range bodies {
		bodies[i] = fmt.Sprintf(`{"rule":"api","key":"10.0.%d.%d"}`, i/256, i%256)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Self()
	for i := range b.N {
		r := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(bodies[i%len(bodies)]))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
	b.ReportMetric(float64(cputime.Self()-cpu)/float64(b.N), "cpu-ns/op")
}
