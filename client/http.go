package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/wire"
)

// maxAnswer bounds the body of an answer the client reads: a batch of
// wire.MaxBatch answers fits many times over.
const maxAnswer = 1 << 20

// call sends method url with in as its JSON body (none when in is nil)
// and the bearer token (none when empty), and decodes an answer of
// status want into out (unless out is nil). Any other answer is an
// error: see answerError.
func (c *Client) call(ctx context.Context, method, url, token string, in, out any, want int) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("client: %w: %v", sluice.ErrInvalidRequest, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return fmt.Errorf("client: %w: %v", sluice.ErrInvalidRequest, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c.roundTrips.Add(1)
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.unavailable(err)
	}
	// Read the body to its end, so that the connection goes back to the
	// pool for the next call.
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return c.unavailable(fmt.Errorf("reading the answer of %s: %w", url, err))
	}
	if resp.StatusCode != want {
		return c.answerError(url, resp, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return c.unavailable(fmt.Errorf("%s answered %.200q: %w", url, data, err))
	}
	return nil
}

// answerError turns an error answer into an error: the service's fault
// (5xx, or a status no endpoint answers) is ErrUnavailable, a refused
// token ErrUnauthorized, a missing ban or jail ErrNotFound, and
// any other 4xx a request the service refused, sluice.ErrInvalidRequest;
// each with the service's message.
func (c *Client) answerError(url string, resp *http.Response, data []byte) error {
	var e wire.ErrorResponse
	if json.Unmarshal(data, &e) != nil || e.Error == "" {
		e.Error = strings.TrimSpace(string(data))
	}
	msg := fmt.Sprintf("%s: %s: %s", url, resp.Status, e.Error)
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized:
		return fmt.Errorf("client: %w: %s", ErrUnauthorized, msg)
	case code == http.StatusNotFound:
		return fmt.Errorf("client: %w: %s", ErrNotFound, msg)
	case code >= 400 && code < 500 && code != http.StatusTooManyRequests && code != http.StatusRequestTimeout:
		return fmt.Errorf("client: %w: %s", sluice.ErrInvalidRequest, msg)
	}
	return c.unavailable(fmt.Errorf("%s", msg))
}
