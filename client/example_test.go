package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/server"
)

// Example asks sluice serve whether a client address may try to sign
// in, under a rule of 2 a minute. The service runs in the example's own
// process on a loopback port, and both sides read one fixed clock, so
// that the output is stable; an application gives client.New only the
// URL of its sluice serve. The third attempt is denied by the service,
// the fourth by the client's cache of denials, with no round trip.
func Example() {
	ctx := context.Background()
	at := func() time.Time { return time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) }
	rules, err := config.Parse("sluice.yaml", []byte(`rules: [{name: login, limits: ["2/min"]}]`))
	if err != nil {
		fmt.Println(err)
		return
	}
	svc, err := server.NewService(ctx, rules, server.Options{Clock: at, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer svc.Close()
	srv := httptest.NewServer(svc.Handler()) // sluice serve's HTTP API
	defer srv.Close()

	c, err := client.New(client.Config{URL: srv.URL, Clock: at})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	for range 4 {
		d, err := c.Check(ctx, "login", "203.0.113.7")
		if err != nil { // the service did not decide: d is the failure policy's
			fmt.Println(err)
		}
		fmt.Printf("allowed %v, %d left, retry after %v\n", d.Allowed, d.Remaining, d.RetryAfter)
	}
	st := c.Stats()
	fmt.Printf("%d round trips, %d answered from the cache\n", st.RoundTrips, st.CacheHits)
	// Output:
	// allowed true, 1 left, retry after 0s
	// allowed true, 0 left, retry after 0s
	// allowed false, 0 left, retry after 30s
	// allowed false, 0 left, retry after 30s
	// 3 round trips, 1 answered from the cache
}
