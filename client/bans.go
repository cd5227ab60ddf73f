package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/wire"
)

// Bans lists the bans in force, through the admin API.
func (c *Client) Bans(ctx context.Context) ([]wire.Ban, error) {
	var out []wire.Ban
	err := c.adminCall(ctx, http.MethodGet, "/admin/api/bans", nil, &out, http.StatusOK)
	return out, err
}

// Ban bans req.Key in req.Jail (server.ManualJail, "manual", for bans by
// hand) for req.Duration (a Go duration; empty for the jail's own), and
// returns the ban in force. A key is written as in the service's lists:
// an address, a network, or "key:NAME". The service denies the key at
// once; this client's cached denials are unaffected (a ban only denies
// more).
func (c *Client) Ban(ctx context.Context, req wire.BanRequest) (wire.Ban, error) {
	if req.Jail == "" || req.Key == "" {
		return wire.Ban{}, fmt.Errorf("client: %w: jail and key are required", sluice.ErrInvalidRequest)
	}
	var out wire.Ban
	err := c.adminCall(ctx, http.MethodPost, "/admin/api/bans", req, &out, http.StatusCreated)
	return out, err
}

// Lift ends the ban of key in jail; the error wraps ErrNotFound if
// the jail has no ban of key in force. It empties the client's denial
// cache, which may hold denials of the ban (keyed by rule, where bans
// are keyed by address or network); denials cached by other clients
// stay until they expire.
func (c *Client) Lift(ctx context.Context, jail, key string) error {
	if jail == "" || key == "" {
		return fmt.Errorf("client: %w: jail and key are required", sluice.ErrInvalidRequest)
	}
	q := url.Values{"jail": {jail}, "key": {key}}
	err := c.adminCall(ctx, http.MethodDelete, "/admin/api/bans?"+q.Encode(), nil, nil, http.StatusNoContent)
	if err == nil && c.cache != nil {
		c.cache.clear()
	}
	return err
}

// adminCall calls the admin API at path, with the client's token.
func (c *Client) adminCall(ctx context.Context, method, path string, in, out any, want int) error {
	if c.admin == "" {
		return fmt.Errorf("client: %w: no AdminURL", ErrUnsupported)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	return c.call(ctx, method, c.admin+path, c.cfg.AdminToken, in, out, want)
}
