package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice"
)

// Defaults of Config.
const (
	// DefaultTimeout bounds each call to the service whose context has
	// no earlier deadline.
	DefaultTimeout = time.Second
	// DefaultCacheSize is how many denials the cache holds at most.
	DefaultCacheSize = 10_000
	// DefaultFailRetryAfter is the RetryAfter of a denial under
	// sluice.FailClosed.
	DefaultFailRetryAfter = time.Second
)

// Config configures a Client. The zero value of each field means its
// default; at least one of URL and GRPC is required.
type Config struct {
	// URL is the base URL of the service's HTTP API
	// ("http://127.0.0.1:8080"). Checks use it unless GRPC is set; Reset
	// always does. Default none.
	URL string
	// GRPC is the host:port of the service's Envoy rate limit gRPC API
	// (sluice serve -grpc-listen); when set, checks and peeks go there.
	// A denial's wait (Decision.RetryAfter, and how long the denial cache
	// keeps it) comes in the response metadata wire.RetryAfterKey, which
	// sluice serve sends with every denial, to the millisecond, as over
	// HTTP. Default none.
	GRPC string
	// AdminURL is the base URL of the admin API (sluice serve
	// -admin-listen), and AdminToken its bearer token, for the ban
	// operations. Default none: they fail with ErrUnsupported.
	AdminURL, AdminToken string
	// Timeout bounds each call whose context has no earlier deadline.
	// Default DefaultTimeout.
	Timeout time.Duration
	// Failure is the Decision a check returns, beside its error, when
	// the service does not decide (see ErrUnavailable):
	// sluice.FailOpen allows the request (an outage of the limiter must
	// not become an outage of the application); FailClosed denies it,
	// with RetryAfter FailRetryAfter, for actions where letting an
	// abuser through costs more than refusing everyone for a while
	// (password guesses, sending mail). Default FailOpen. FailLocal is
	// refused: the client has no store to decide on.
	Failure sluice.FailurePolicy
	// FailRetryAfter is the RetryAfter of a denial under FailClosed.
	// Default DefaultFailRetryAfter.
	FailRetryAfter time.Duration
	// CacheSize bounds the denial cache, in entries. Default
	// DefaultCacheSize; negative disables the cache.
	CacheSize int
	// HTTPClient sends the HTTP requests. Default a client of its own,
	// whose Transport keeps up to 64 idle connections to the service.
	HTTPClient *http.Client
	// DialOptions are added after the client's own options (plaintext
	// transport credentials) when dialing GRPC: give TLS credentials
	// here. Default none.
	DialOptions []grpc.DialOption
	// Clock reads the time for the denial cache. Default time.Now.
	Clock func() time.Time
}

// A Client asks a sluice serve service whether keys may act under its
// named rules, over the HTTP JSON API or Envoy's gRPC API, and manages
// its bans over the admin API. It reuses its connections (one
// http.Client and one grpc.ClientConn) and remembers denials until they
// expire (see the package documentation).
//
// Create Clients with New and Close them when done; the zero value is
// not usable. A Client is safe for concurrent use.
type Client struct {
	cfg   Config
	base  string // URL without its trailing slash
	admin string // AdminURL without its trailing slash
	hc    *http.Client
	own   bool // hc is the client's own: Close closes its idle connections
	conn  *grpc.ClientConn
	rls   pb.RateLimitServiceClient
	cache *denialCache // nil when disabled

	roundTrips, hits, failures atomic.Uint64
}

// New returns a Client for c. It does not connect: the first call does.
func New(c Config) (*Client, error) {
	if c.URL == "" && c.GRPC == "" {
		return nil, fmt.Errorf("client: %w: give URL or GRPC", sluice.ErrInvalidRequest)
	}
	if err := c.Failure.CheckOpenClosed(); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c.Timeout = cmpOr(c.Timeout, DefaultTimeout)
	c.FailRetryAfter = cmpOr(c.FailRetryAfter, DefaultFailRetryAfter)
	if c.Clock == nil {
		c.Clock = time.Now
	}
	cl := &Client{cfg: c, base: strings.TrimRight(c.URL, "/"), admin: strings.TrimRight(c.AdminURL, "/"), hc: c.HTTPClient}
	if cl.hc == nil {
		cl.hc, cl.own = &http.Client{Transport: newTransport()}, true
	}
	if c.CacheSize >= 0 {
		cl.cache = newDenialCache(cmpOr(c.CacheSize, DefaultCacheSize))
	}
	if c.GRPC != "" {
		opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, c.DialOptions...)
		conn, err := grpc.NewClient(c.GRPC, opts...)
		if err != nil {
			return nil, fmt.Errorf("client: grpc %s: %w", c.GRPC, err)
		}
		cl.conn, cl.rls = conn, pb.NewRateLimitServiceClient(conn)
	}
	return cl, nil
}

// newTransport returns the Transport of a Client's own http.Client:
// many idle connections to the one host (the default keeps 2, so a
// busy client would dial for most requests), kept for less time than
// sluice serve keeps them idle (server.IdleTimeout), so that the client
// seldom picks one the server is closing.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 10 * time.Second,
		ForceAttemptHTTP2:     true,
	}
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Close closes the client's gRPC connection and its idle HTTP
// connections. Calls in flight may fail.
func (c *Client) Close() error {
	if c.own {
		c.hc.CloseIdleConnections()
	}
	if c.conn != nil {
		return c.conn.Close()
	}
	return nil
}

// Stats are a Client's counters since New.
type Stats struct {
	// RoundTrips counts the requests sent to the service: a batch of
	// checks counts once over HTTP, and once per check over gRPC.
	RoundTrips uint64
	// CacheHits counts the checks and peeks the denial cache answered,
	// each a round trip saved.
	CacheHits uint64
	// Failures counts the round trips that ended in ErrUnavailable.
	Failures uint64
	// Cached is how many denials the cache holds now.
	Cached int
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	s := Stats{RoundTrips: c.roundTrips.Load(), CacheHits: c.hits.Load(), Failures: c.failures.Load()}
	if c.cache != nil {
		s.Cached = c.cache.len()
	}
	return s
}

// unavailable wraps err, the cause of a failed round trip, in
// ErrUnavailable, and counts it.
func (c *Client) unavailable(err error) error {
	c.failures.Add(1)
	return fmt.Errorf("client: %w: %w", ErrUnavailable, err)
}

// failed returns the Decision of the failure policy for an error: for
// ErrUnavailable, sluice.FailOpen allows and FailClosed denies; any other
// error (a request the service refused) comes with a zero Decision.
func (c *Client) failed(err error) sluice.Decision {
	if !errors.Is(err, ErrUnavailable) {
		return sluice.Decision{}
	}
	if c.cfg.Failure == sluice.FailClosed {
		return sluice.Decision{RetryAfter: c.cfg.FailRetryAfter, Time: c.cfg.Clock()}
	}
	return sluice.Decision{Allowed: true, Time: c.cfg.Clock()}
}

// withTimeout bounds ctx by the client's Timeout.
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.Timeout)
}
