package client_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/testing/rlstest"
	"github.com/sluicehq/sluice/internal/testing/servicetest"
	"github.com/sluicehq/sluice/internal/testing/testclock"
	"github.com/sluicehq/sluice/server"
)

// rulesConfig is the configuration of the service the tests start.
const rulesConfig = `rules:
  - name: api
    limits: ["3/min"]
  - name: login
    limits: ["2/min"]
  - name: once
    limits: ["1/h"]
  - name: hot
    limits: ["100/s"]
  - name: reports
    concurrency: {limit: 1, ttl: 1m}
guard:
  deny: ["key:blocked"]
admin:
  token: ` + adminToken + `
`

const adminToken = "test-token-0123456789"

// t0 starts every test clock.
var t0 = testclock.T0

// service is a sluice serve started by a test, in process, on loopback
// listeners: its HTTP API, its Envoy gRPC API (as sluice serve
// -grpc-listen serves it by default: without -grpc-headers) and its
// admin API.
type service struct {
	*server.Service
	URL, GRPC, Admin string
	Conns            *atomic.Int64    // connections the HTTP API accepted
	Clock            *testclock.Clock // nil for the real clock
}

// startService starts the service of rulesConfig until the test ends,
// on clk (nil: the store's own clock).
func startService(t testing.TB, clk *testclock.Clock) *service {
	t.Helper()
	var o server.Options
	if clk != nil {
		o.Clock = clk.Now
	}
	svc := servicetest.New(t, rulesConfig, o)
	var conns atomic.Int64
	hs := httptest.NewUnstartedServer(svc.Handler())
	hs.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	hs.Start()
	t.Cleanup(hs.Close)
	as := httptest.NewServer(svc.AdminHandler())
	t.Cleanup(as.Close)
	return &service{Service: svc, URL: hs.URL, GRPC: rlstest.Listen(t, svc.RateLimitService()), Admin: as.URL, Conns: &conns, Clock: clk}
}

// transports are the two ways a client reaches the service.
var transports = []string{"http", "grpc"}

// newClient returns a client of s over transport, with c's other
// fields, closed when the test ends.
func newClient(t testing.TB, s *service, transport string, c client.Config) *client.Client {
	t.Helper()
	c.URL, c.AdminURL, c.AdminToken = s.URL, s.Admin, adminToken
	if transport == "grpc" {
		c.GRPC = s.GRPC
	}
	if c.Clock == nil && s.Clock != nil {
		c.Clock = s.Clock.Now
	}
	cl, err := client.New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// silentAddr returns the address of a loopback listener that accepts
// connections and never answers, closed when the test ends.
func silentAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}
