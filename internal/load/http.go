package load

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluicehq/sluice/wire"
	"google.golang.org/protobuf/encoding/protojson"
)

// httpClient asks sluice's HTTP API, POST /v1/check, or, for a target
// whose path is /json, envoyproxy/ratelimit's HTTP endpoint (which
// sluice serve also answers), over at most Conns keep-alive connections.
type httpClient struct {
	url   string
	envoy bool // /json: Envoy's request, and the answer in the status
	hc    *http.Client
	tr    *http.Transport
	cfg   Config
}

// jsonPath is the path of envoyproxy/ratelimit's HTTP endpoint.
const jsonPath = "/json"

func newHTTP(u *url.URL, cfg Config) (*httpClient, error) {
	tr := &http.Transport{
		MaxConnsPerHost:     cfg.Conns,
		MaxIdleConnsPerHost: cfg.Conns,
		DisableCompression:  true,
		Proxy:               nil, // never a proxy: the target is loopback
		TLSClientConfig:     cfg.TLS,
	}
	c := &httpClient{hc: &http.Client{Transport: tr}, tr: tr, cfg: cfg}
	base := *u
	switch strings.TrimRight(u.Path, "/") {
	case "":
		base.Path = "/v1/check"
	case jsonPath:
		if cfg.Domain == "" {
			return nil, errors.New("load: Envoy's /json API needs a domain and descriptors")
		}
		base.Path, c.envoy = jsonPath, true
	default:
		return nil, fmt.Errorf("load: target path %q: want none (POST /v1/check) or %s (Envoy's HTTP API)", u.Path, jsonPath)
	}
	c.url = base.String()
	return c, nil
}

// body returns the JSON request of key: Envoy's RateLimitRequest for
// /json, else the HTTP API's check.
func (c *httpClient) body(key string) ([]byte, error) {
	if c.envoy {
		return protojson.Marshal(rlsRequest(c.cfg, key))
	}
	chk := wire.CheckRequest{Rule: c.cfg.Rule, Domain: c.cfg.Domain, Cost: c.cfg.Hits}
	if c.cfg.Rule != "" {
		chk.Key = key
	}
	for _, d := range c.cfg.Descriptors {
		es, _ := parseDescriptor(d, key) // checked by withDefaults
		var hd wire.Descriptor
		for _, e := range es {
			hd.Entries = append(hd.Entries, wire.Entry{Key: e.key, Value: e.value})
		}
		chk.Descriptors = append(chk.Descriptors, hd)
	}
	return json.Marshal(chk)
}

func (c *httpClient) do(ctx context.Context, key string) (bool, error) {
	body, err := c.body(key)
	if err != nil {
		return false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return false, err
	}
	if c.envoy && resp.StatusCode == http.StatusTooManyRequests {
		return false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("load: %s: %s", resp.Status, bytes.TrimSpace(data))
	}
	if c.envoy {
		return true, nil
	}
	var out wire.CheckResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return false, fmt.Errorf("load: answer %q: %w", data, err)
	}
	return out.Allowed, nil
}

func (c *httpClient) close() error {
	c.tr.CloseIdleConnections()
	return nil
}
