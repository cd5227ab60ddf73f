package client

import (
	"context"

	"github.com/sluicehq/sluice/wire"
)

// Acquire asks for a place among the requests in flight for req.Key under
// the service's concurrency rule req.Rule (see docs/concurrency.md), at
// once or waiting up to req.Wait seconds: OK reports a place granted, and
// ID names the lease to Release or Extend. A refusal is an answer with OK
// false, not an error. Over the HTTP API.
func (c *Client) Acquire(ctx context.Context, req wire.AcquireRequest) (wire.LeaseResponse, error) {
	return post[wire.LeaseResponse](ctx, c, "/v1/acquire", req.Rule, req.Key, req)
}

// Release ends the lease req.ID: its place is free at once. OK reports
// that the lease was live.
func (c *Client) Release(ctx context.Context, req wire.LeaseRef) (wire.LeaseResponse, error) {
	return post[wire.LeaseResponse](ctx, c, "/v1/release", req.Rule, req.Key, req)
}

// Extend renews the live lease req.ID for its rule's TTL from now. OK
// reports that it was live (an expired lease is not revived).
func (c *Client) Extend(ctx context.Context, req wire.LeaseRef) (wire.LeaseResponse, error) {
	return post[wire.LeaseResponse](ctx, c, "/v1/extend", req.Rule, req.Key, req)
}
