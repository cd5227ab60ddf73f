// Package deploy holds the files that deploy sluice serve — a Dockerfile,
// a Kubernetes example and an Envoy configuration — and the tests that
// keep them true: they parse each file with what reads it for real
// (sluice's config package, Envoy's protos) and build and run the binary
// as the Dockerfile does.
package deploy
