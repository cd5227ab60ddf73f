package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/server"
)

// A Service on the in-process store, asked without a network through
// httptest. The clock is fixed so that the output is the same every run.
func Example() {
	cfg, err := config.Parse("rules.yaml", []byte(`
rules:
  - name: login
    limits: ["2/min"]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	svc, err := server.NewService(context.Background(), cfg, server.Options{
		Clock: func() time.Time { return time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer svc.Close()
	srv := svc.Handler()
	for range 3 {
		r := httptest.NewRequest("POST", "/v1/check", strings.NewReader(`{"rule":"login","key":"203.0.113.7"}`))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		fmt.Print(w.Code, " ", w.Body)
		if ra := w.Header().Get("Retry-After"); ra != "" {
			fmt.Println("Retry-After:", ra, "RateLimit:", w.Header().Get("RateLimit"))
		}
	}
	// Output:
	// 200 {"allowed":true,"rule":"login","limit":2,"policy":"2/min","remaining":1,"reset_after":30,"retry_after":0}
	// 200 {"allowed":true,"rule":"login","limit":2,"policy":"2/min","remaining":0,"reset_after":60,"retry_after":0}
	// 200 {"allowed":false,"rule":"login","limit":2,"policy":"2/min","remaining":0,"reset_after":60,"retry_after":30}
	// Retry-After: 30 RateLimit: "login";r=0;t=60
}
