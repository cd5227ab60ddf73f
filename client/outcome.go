package client

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server/httpapi"
)

// Insert counts n for key under the named rule whether or not it fits (a
// penalty), or gives -n back (n < 0, a reward), and reports whether key
// may still act. A reward forgets the key's cached denial. Over the
// HTTP API: it needs Config.URL.
func (c *Client) Insert(ctx context.Context, rule, key string, n int) (sluice.Decision, error) {
	var resp httpapi.CheckResponse
	if err := c.post(ctx, "/v1/insert", rule, key, httpapi.InsertRequest{Rule: rule, Key: key, Cost: n}, &resp); err != nil {
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
func (c *Client) Reserve(ctx context.Context, req httpapi.OutcomeRequest) (httpapi.OutcomeResponse, error) {
	return c.outcome(ctx, "/v1/reserve", req)
}

// Commit keeps a reserved take, once per id. The error wraps
// sluice.ErrInvalidRequest when the reservation is unknown or expired.
func (c *Client) Commit(ctx context.Context, req httpapi.OutcomeRequest) (httpapi.OutcomeResponse, error) {
	return c.outcome(ctx, "/v1/commit", req)
}

// Refund gives a reserved take back, once per id, and forgets the key's
// cached denial.
func (c *Client) Refund(ctx context.Context, req httpapi.OutcomeRequest) (httpapi.OutcomeResponse, error) {
	resp, err := c.outcome(ctx, "/v1/refund", req)
	if err == nil && c.cache != nil {
		c.cache.remove(cacheKey(req.Rule, req.Key))
	}
	return resp, err
}

// Report reports the outcome of unreserved work once per id: "failure"
// counts req.Cost whether or not it fits and tells the rule's jail.
func (c *Client) Report(ctx context.Context, req httpapi.OutcomeRequest) (httpapi.OutcomeResponse, error) {
	return c.outcome(ctx, "/v1/report", req)
}

func (c *Client) outcome(ctx context.Context, path string, req httpapi.OutcomeRequest) (httpapi.OutcomeResponse, error) {
	var resp httpapi.OutcomeResponse
	err := c.post(ctx, path, req.Rule, req.Key, req, &resp)
	return resp, err
}

// LoginBegin begins an attempt of a login rule of the service; settle
// an allowed one with LoginFail or LoginSucceed, sending back its
// ticket. Over the HTTP API.
func (c *Client) LoginBegin(ctx context.Context, req httpapi.LoginRequest) (httpapi.LoginResponse, error) {
	var resp httpapi.LoginResponse
	err := c.post(ctx, "/v1/login/begin", req.Login, req.Address, req, &resp)
	return resp, err
}

// LoginFail settles an attempt as failed, once per ticket.
func (c *Client) LoginFail(ctx context.Context, req httpapi.LoginRequest) (httpapi.SettleResponse, error) {
	var resp httpapi.SettleResponse
	err := c.post(ctx, "/v1/login/fail", req.Login, req.Address, req, &resp)
	return resp, err
}

// LoginSucceed settles an attempt as succeeded, once per ticket.
func (c *Client) LoginSucceed(ctx context.Context, req httpapi.LoginRequest) (httpapi.SettleResponse, error) {
	var resp httpapi.SettleResponse
	err := c.post(ctx, "/v1/login/succeed", req.Login, req.Address, req, &resp)
	return resp, err
}

// post sends in to path of the HTTP API, naming (a, b) what it is about,
// both required, and decodes the 200 answer into out.
func (c *Client) post(ctx context.Context, path, a, b string, in, out any) error {
	if c.base == "" {
		return fmt.Errorf("client: %s: %w: no URL of the HTTP API", path, ErrUnsupported)
	}
	if a == "" || b == "" {
		return fmt.Errorf("client: %w: %s needs a rule (or login) and a key (or address)", sluice.ErrInvalidRequest, path)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	return c.call(ctx, http.MethodPost, c.base+path, "", in, out, http.StatusOK)
}
