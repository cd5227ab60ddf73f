package wire_test

import (
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/wire"
)

// A check of a named rule, as a client sends it to POST /v1/check, and
// the service's answer, read back.
func Example() {
	body, _ := json.Marshal(wire.CheckRequest{Rule: "login", Key: "203.0.113.7"})
	fmt.Println(string(body))

	var resp wire.CheckResponse
	answer := `{"allowed":false,"rule":"login","limit":5,"policy":"5/min","remaining":0,"reset_after":59.2,"retry_after":11.2}`
	if err := json.Unmarshal([]byte(answer), &resp); err != nil {
		panic(err)
	}
	fmt.Println(resp.Allowed, resp.Policy, resp.RetryAfter)
	// Output:
	// {"rule":"login","key":"203.0.113.7"}
	// false 5/min 11.2
}
