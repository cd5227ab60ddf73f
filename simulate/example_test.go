package simulate_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/simulate"
)

// Replay four sign-ins of one client, two a minute allowed.
func Example() {
	rules, err := config.Parse("rules.yaml", []byte("rules:\n  - name: login\n    limits: [\"2/min fixed\"]\n"))
	if err != nil {
		panic(err)
	}
	log := strings.Repeat(`203.0.113.7 - - [05/Jan/2026:10:00:01 +0000] "POST /login HTTP/1.1" 200 5 "-" "curl/8.0"`+"\n", 4)
	rep, err := simulate.Run(context.Background(), simulate.Options{
		Config: simulate.Config{Rules: rules},
		Stdin:  strings.NewReader(log),
	})
	if err != nil {
		panic(err)
	}
	r := rep.Rules[0]
	fmt.Printf("%s: %d requests, %d would be denied, first at %s\n", r.Rule, r.Requests, r.WouldDeny, r.FirstDenial.Format("15:04:05"))
	fmt.Printf("most denied: %s (%d)\n", r.TopDenied[0].Key, r.TopDenied[0].Denied)
	// Output:
	// login: 4 requests, 2 would be denied, first at 10:00:01
	// most denied: 203.0.113.7 (2)
}
