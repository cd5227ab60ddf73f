package client

import (
	"context"

	"github.com/sluicehq/sluice"
)

// A Rule is one named rule of the service as an httplimit.Decider, for
// httplimit's middleware: its takes are the client's checks (denials
// answered from the cache), its resets the client's. It cannot give a
// take back (the service's API has no refund), so a middleware refuses
// a Rule that counts by response status (httplimit.Rule.Count). Safe for
// concurrent use.
type Rule struct {
	c      *Client
	name   string
	limits []sluice.Limit
}

// Rule returns the service's rule called name. limits are its limits as
// the service's configuration sets them: the middleware writes them in
// the RateLimit-Policy field (the service decides by its own).
func (c *Client) Rule(name string, limits ...sluice.Limit) *Rule {
	return &Rule{c: c, name: name, limits: append([]sluice.Limit(nil), limits...)}
}

// sharedKey is the key of requests without one: the middleware limits
// them under "", which the service refuses as a key.
const sharedKey = "#shared"

// Allow takes one unit from key, as Client.Check does; requests without
// a key ("") share one.
func (r *Rule) Allow(ctx context.Context, key string) (sluice.Decision, error) {
	if key == "" {
		key = sharedKey
	}
	return r.c.Check(ctx, r.name, key)
}

// Reset forgets key's state under the rule, as Client.Reset does.
func (r *Rule) Reset(ctx context.Context, key string) error {
	if key == "" {
		key = sharedKey
	}
	return r.c.Reset(ctx, r.name, key)
}

// Limits returns the limits given to Client.Rule.
func (r *Rule) Limits() []sluice.Limit { return append([]sluice.Limit(nil), r.limits...) }
