// Package wire holds the types that travel between sluice serve and its
// clients: the bodies of the HTTP JSON API (checks, resets, batches,
// inserts, outcome calls, logins, leases), its error answer, and the
// bans of the admin API, in JSON; and, in wire/sluicepb, the generated
// protocol buffers of the gRPC API (sluice.v1.Limits and Leases). The
// service decodes and encodes these very types, and package client sends
// and reads them: each is defined once.
//
// It depends on the standard library alone, so that a client of the
// service carries none of the server (its configuration, rules engine,
// metrics or tracing). The rest of the admin API, which serves the
// dashboard, keeps its types in server/admin; Envoy's rate limit API
// (checks over gRPC) is Envoy's own protobuf, whose units of time
// (EnvoyUnit) are tabled here once for the configuration files, the
// service's answers and the client.
//
// # Conventions
//
// Durations are seconds in a float64 (retry_after, reset_after, delay),
// rounded up to the millisecond by the service: a client that waits
// less than the true wait would be refused again. Times are RFC 3339.
// Bodies are JSON objects; the service refuses unknown fields, so a
// misspelt "cots" is an error rather than a silent cost of 1. The
// OpenAPI description of the HTTP API, server/httpapi/openapi.yaml,
// describes these types as the service serves them.
package wire
