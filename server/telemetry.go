package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	promBridge "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
)

// tracerName is the instrumentation scope of the service's spans.
const tracerName = "github.com/sluicehq/sluice/server"

// telemetry is the OpenTelemetry of a Service: the tracer of its spans
// (nil when traces are off, which costs a decision one nil check) and
// the providers to flush and stop when it closes.
type telemetry struct {
	tracer   trace.Tracer
	shutdown []func(context.Context) error
}

// newTelemetry sets up what c asks for: traces and the metrics of reg,
// both sent over OTLP/HTTP. A TracerProvider in o takes the place of
// the traces' exporter (for embedding and tests). Exports run in the
// background; their failures are logged through log, which throttles
// them.
func newTelemetry(ctx context.Context, c config.Telemetry, o Options, reg prometheus.Gatherer, log *slog.Logger) (*telemetry, error) {
	t := &telemetry{}
	if o.TracerProvider != nil {
		t.tracer = o.TracerProvider.Tracer(tracerName)
	}
	if !c.Enabled() {
		return t, nil
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("telemetry: export failed", "err", err) }))
	res := resource.NewSchemaless(attribute.String("service.name", "sluice"))
	if c.Traces && t.tracer == nil {
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(c.Endpoint)}
		if c.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, err
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SampleRatio))))
		t.tracer, t.shutdown = tp.Tracer(tracerName), append(t.shutdown, tp.Shutdown)
	}
	if c.Metrics {
		opts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpoint(c.Endpoint)}
		if c.Insecure {
			opts = append(opts, otlpmetrichttp.WithInsecure())
		}
		exp, err := otlpmetrichttp.New(ctx, opts...)
		if err != nil {
			return nil, errors.Join(err, t.close(ctx))
		}
		reader := sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(c.Interval),
			sdkmetric.WithProducer(promBridge.NewMetricProducer(promBridge.WithGatherer(reg))))
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
		t.shutdown = append(t.shutdown, mp.Shutdown)
	}
	return t, nil
}

// close flushes what is left to send, and stops.
func (t *telemetry) close(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	t.shutdown = nil
	return errors.Join(errs...)
}

// traceContext continues, in the requests of h, the trace a client's
// traceparent header names, when traces are on.
func (t *telemetry) traceContext(h http.Handler) http.Handler {
	if t.tracer == nil {
		return h
	}
	prop := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))))
	})
}
