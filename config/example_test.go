package config_test

import (
	"fmt"

	"github.com/sluicehq/sluice/config"
)

func ExampleParse() {
	c, err := config.Parse("sluice.yaml", []byte(`
listen: 127.0.0.1:9000
rules:
  - name: login
    limits: ["5/min", "20/h"]
  - name: api
    limits: ["100/s burst 200"]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Store.Type, c.Listen)
	for _, r := range c.Rules {
		fmt.Println(r.Name, r.Limits)
	}

	_, err = config.Parse("bad.yaml", []byte(`
rules:
  - name: login
    limits: ["5/min", "20/hour", "7/fortnight"]
`))
	fmt.Println(err)
	// Output:
	// memory 127.0.0.1:9000
	// login [5/min 20/h]
	// api [100/s burst 200]
	// bad.yaml:4: rules[0].limits[2]: limit "7/fortnight": sluice: invalid limit: period "fortnight" is not a unit (s, min, h, day, week) or a duration (5m, 1h30m, 2d)
}
