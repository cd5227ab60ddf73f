package config_test

import (
	"errors"
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

	// Every mistake of a file, in one run: each with its place, its
	// field and what to write instead.
	_, err = config.Parse("bad.yaml", []byte(`
rules:
  - name: login
    limts: ["5/min", "20/h"]
  - name: api
    limits: ["100/s slidng", "7/fortnight"]
failure: {timeout: 5 minutes}
`))
	var mistakes config.Errors
	if errors.As(err, &mistakes) {
		for _, m := range mistakes {
			fmt.Println(m)
		}
	}
	// Output:
	// memory 127.0.0.1:9000
	// login [5/min 20/h]
	// api [100/s burst 200]
	// bad.yaml:4:5: rules[0]: unknown field "limts"; did you mean "limits"? (rules[0] takes name, limits, shadow, domain, descriptors, concurrency)
	// bad.yaml:6:14: rules[1].limits[0]: limit "100/s slidng": unknown option "slidng" (want an algorithm: gcra, fixed, sliding, approx or log; or burst N, buckets N or staggered); did you mean "100/s sliding"?
	// bad.yaml:6:30: rules[1].limits[1]: limit "7/fortnight": period "fortnight" is not a unit (s, min, h, day, week) or a duration (5m, 1h30m, 2d)
	// bad.yaml:7:20: failure.timeout: "5 minutes" is not a duration: write a number and a unit (ns, us, ms, s, m, h) without a space, such as 300ms, 10m or 168h; did you mean "5m"?
}
