package client

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/wire"
)

// Insert counts n for key under the named rule whether or not it fits (a
// penalty), or gives -n back (n < 0, a reward), and reports whether key
// may still act. A reward forgets the key's cached denial. Over the
// HTTP API: it needs Config.URL.
func (c *Client) Insert(ctx context.Context, rule, key string, n int) (sluice.Decision, error) {
	resp, err := post[wire.CheckResponse](ctx, c, "/v1/insert", rule, key, wire.InsertRequest{Rule: rule, Key: key, Cost: n})
	if err != nil {
		return sluice.Decision{}, err
	}
	if n < 0 && c.cache != nil {
		c.cache.remove(cacheKey(rule, key))
	}
	return decision(resp), nil
}

// Reserve takes req.Cost of req.Key under req.Rule now and holds it,
// awaiting Commit or Refund with the same request, for a minute; after
// that it stays counted. A retried reserve with the same req.ID takes
// nothing (Duplicate). Over the HTTP API.
func (c *Client) Reserve(ctx context.Context, req wire.OutcomeRequest) (wire.OutcomeResponse, error) {
	return post[wire.OutcomeResponse](ctx, c, "/v1/reserve", req.Rule, req.Key, req)
}

// Commit keeps a reserved take, once per id. The error wraps
// sluice.ErrInvalidRequest when the reservation is unknown or expired.
func (c *Client) Commit(ctx context.Context, req wire.OutcomeRequest) (wire.OutcomeResponse, error) {
	return post[wire.OutcomeResponse](ctx, c, "/v1/commit", req.Rule, req.Key, req)
}

// Refund gives a reserved take back, once per id, and forgets the key's
// cached denial.
func (c *Client) Refund(ctx context.Context, req wire.OutcomeRequest) (wire.OutcomeResponse, error) {
	resp, err := post[wire.OutcomeResponse](ctx, c, "/v1/refund", req.Rule, req.Key, req)
	if err == nil && c.cache != nil {
		c.cache.remove(cacheKey(req.Rule, req.Key))
	}
	return resp, err
}

// Report reports the outcome of unreserved work once per id: "failure"
// counts req.Cost whether or not it fits and tells the rule's jail.
func (c *Client) Report(ctx context.Context, req wire.OutcomeRequest) (wire.OutcomeResponse, error) {
	return post[wire.OutcomeResponse](ctx, c, "/v1/report", req.Rule, req.Key, req)
}

// LoginBegin begins an attempt of a login rule of the service; settle
// an allowed one with LoginFail or LoginSucceed, sending back its
// ticket. Over the HTTP API.
func (c *Client) LoginBegin(ctx context.Context, req wire.LoginRequest) (wire.LoginResponse, error) {
	return post[wire.LoginResponse](ctx, c, "/v1/login/begin", req.Login, req.Address, req)
}

// LoginFail settles an attempt as failed, once per ticket.
func (c *Client) LoginFail(ctx context.Context, req wire.LoginRequest) (wire.SettleResponse, error) {
	return post[wire.SettleResponse](ctx, c, "/v1/login/fail", req.Login, req.Address, req)
}

// LoginSucceed settles an attempt as succeeded, once per ticket.
func (c *Client) LoginSucceed(ctx context.Context, req wire.LoginRequest) (wire.SettleResponse, error) {
	return post[wire.SettleResponse](ctx, c, "/v1/login/succeed", req.Login, req.Address, req)
}

// post sends in to path of the HTTP API, naming (a, b) what it is about,
// both required, and decodes the 200 answer as an R.
func post[R any](ctx context.Context, c *Client, path, a, b string, in any) (R, error) {
	var out R
	if c.base == "" {
		return out, fmt.Errorf("client: %s: %w: no URL of the HTTP API", path, ErrUnsupported)
	}
	if a == "" || b == "" {
		return out, fmt.Errorf("client: %w: %s needs a rule (or login) and a key (or address)", sluice.ErrInvalidRequest, path)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	err := c.call(ctx, http.MethodPost, c.base+path, "", in, &out, http.StatusOK)
	return out, err
}
