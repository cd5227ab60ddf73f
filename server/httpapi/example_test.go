package httpapi_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/server/httpapi"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/store/memory"
)

// The HTTP API over a rules engine on the in-process store, asked without
// a network through httptest. The clock is fixed so that the output is
// the same every run.
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
	store := memory.New(memory.Config{})
	defer store.Close()
	engine, err := rules.New(rules.Config{
		Store: store,
		Rules: cfg.Rules,
		Clock: func() time.Time { return time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	api, err := httpapi.New(httpapi.Config{Engine: engine})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 3 {
		r := httptest.NewRequest("POST", "/v1/check", strings.NewReader(`{"rule":"login","key":"203.0.113.7"}`))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		fmt.Print(w.Code, " ", w.Body)
	}
	// Output:
	// 200 {"allowed":true,"rule":"login","limit":2,"policy":"2/min","remaining":1,"reset_after":30,"retry_after":0}
	// 200 {"allowed":true,"rule":"login","limit":2,"policy":"2/min","remaining":0,"reset_after":60,"retry_after":0}
	// 200 {"allowed":false,"rule":"login","limit":2,"policy":"2/min","remaining":0,"reset_after":60,"retry_after":30}
}
