// Package servicetest builds sluice serve's service (package server) from
// a YAML configuration in tests and benchmarks, closed when they end.
package servicetest

import (
	"context"
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/server"
)

// New returns the service of the configuration text, with o's options
// (a discarding logger if o has none); the test fails if text does not
// parse or the service cannot start.
func New(t testing.TB, text string, o server.Options) *server.Service {
	t.Helper()
	c, err := config.Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	svc, err := server.NewService(context.Background(), c, o)
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	t.Cleanup(func() { svc.Close() })
	return svc
}
