package config

import (
	"errors"
	"fmt"
	"time"
)

// DefaultTelemetryInterval is how often metrics are sent over OTLP.
const DefaultTelemetryInterval = 30 * time.Second

// Telemetry configures OpenTelemetry: traces of decisions and of the
// store calls under them, and the service's metrics (those of /metrics),
// sent to a collector over OTLP/HTTP. Off by default: with no Endpoint,
// nothing is traced or sent, and a decision pays one nil check.
type Telemetry struct {
	// Endpoint is the collector's OTLP/HTTP address, host:port (4318 by
	// convention). Default empty: telemetry is off.
	Endpoint string
	// Insecure sends over plain HTTP, for a collector on loopback or in
	// the same pod. Default false: HTTPS.
	Insecure bool
	// Traces and Metrics choose what is sent. Default both, when
	// Endpoint is set.
	Traces, Metrics bool
	// SampleRatio is the share of decisions traced, in (0, 1], unless
	// the request carries a sampled trace context. Default 1.
	SampleRatio float64
	// Interval is how often metrics are sent. Default
	// DefaultTelemetryInterval; at least a second.
	Interval time.Duration
}

// Enabled reports whether t sends anything.
func (t Telemetry) Enabled() bool { return t.Endpoint != "" && (t.Traces || t.Metrics) }

type fileTelemetry struct {
	Endpoint    string   `yaml:"endpoint"`
	Insecure    bool     `yaml:"insecure"`
	Traces      *bool    `yaml:"traces"`
	Metrics     *bool    `yaml:"metrics"`
	SampleRatio *float64 `yaml:"sample_ratio"`
	Interval    string   `yaml:"interval"`
}

// telemetry validates the telemetry section.
func (f *fileTelemetry) telemetry(v *validator) (Telemetry, error) {
	t := Telemetry{Endpoint: f.Endpoint, Insecure: f.Insecure, Traces: true, Metrics: true, SampleRatio: 1, Interval: DefaultTelemetryInterval}
	if f.Endpoint == "" {
		if f.Traces != nil || f.Metrics != nil || f.SampleRatio != nil || f.Interval != "" {
			return t, v.errorf(at("telemetry"), "telemetry needs an endpoint (the collector's OTLP/HTTP host:port)")
		}
		return Telemetry{}, nil
	}
	errs := []error{listenAddr(v, at("telemetry", "endpoint"), f.Endpoint)}
	if f.Traces != nil {
		t.Traces = *f.Traces
	}
	if f.Metrics != nil {
		t.Metrics = *f.Metrics
	}
	if r := f.SampleRatio; r != nil {
		if !(*r > 0 && *r <= 1) {
			errs = append(errs, v.errorf(at("telemetry", "sample_ratio"), "%v is not in (0, 1]", *r))
		}
		t.SampleRatio = *r
	}
	if f.Interval != "" {
		d, err := time.ParseDuration(f.Interval)
		if err != nil || d < time.Second {
			errs = append(errs, v.errorf(at("telemetry", "interval"), "%q: want a duration of a second or more, such as 30s", f.Interval))
		}
		t.Interval = d
	}
	return t, errors.Join(errs...)
}

// String describes t for a log line.
func (t Telemetry) String() string {
	if !t.Enabled() {
		return "off"
	}
	return fmt.Sprintf("OTLP/HTTP %s (traces %v at %v, metrics %v every %v)", t.Endpoint, t.Traces, t.SampleRatio, t.Metrics, t.Interval)
}
