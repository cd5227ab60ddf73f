package rules_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/store/memory"
)

func Example() {
	c, err := config.Parse("sluice.yaml", []byte(`
rules:
  - name: login
    limits: ["3/min"]
  - domain: edge
    descriptors:
      - key: path
        value: /login
        descriptors:
          - key: remote_address
            limits: ["2/min sliding"]
      - key: remote_address
        rate_limit: {unit: second, requests_per_unit: 100}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	st := memory.New(memory.Config{})
	defer st.Close()
	now := func() time.Time { return time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) }
	eng, err := rules.New(rules.Config{Store: st, Rules: c.Rules, Domains: c.Domains, Clock: now})
	if err != nil {
		fmt.Println(err)
		return
	}
	ip := rules.Entry{Key: "remote_address", Value: "203.0.113.7"}
	req := rules.Request{Domain: "edge", Descriptors: []rules.Descriptor{
		{Entries: []rules.Entry{ip}},
		{Entries: []rules.Entry{{Key: "path", Value: "/login"}, ip}},
	}}
	for range 3 {
		res, err := eng.Check(context.Background(), req)
		if err != nil {
			fmt.Println(err)
			return
		}
		login := res.Statuses[1]
		fmt.Println(res.Allowed, login.Rule.ID, login.Decision.Remaining)
	}
	res, _ := eng.Check(context.Background(), rules.Request{Domain: "login", Descriptors: []rules.Descriptor{rules.Key("alice")}})
	fmt.Println(res.Allowed, res.Statuses[0].Rule.Policy())
	// Output:
	// true edge.path_/login.remote_address 1
	// true edge.path_/login.remote_address 0
	// false edge.path_/login.remote_address 0
	// true "login";q=3;w=60
}
