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

	"github.com/sluicehq/sluice/config"
)

// BenchmarkCheck measures one check of a named rule through the
// service's HTTP API, on 10,000 keys over the memory store, with guard
// lists that pass them: the handler, the engine, the guard and the
// rule's metered store, without a network.
func BenchmarkCheck(b *testing.B) {
	c, err := config.Parse("b.yaml", []byte("rules:\n  - name: api\n    limits: [\"1000/min\"]\nguard:\n  allow: [192.0.2.10]\n  deny: [198.51.100.0/24]\n"))
	if err != nil {
		b.Fatal(err)
	}
	s, err := NewService(context.Background(), c, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
	for i := range b.N {
		r := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(bodies[i%len(bodies)]))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}
