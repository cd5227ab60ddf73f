package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/cputime"
	"github.com/sluicehq/sluice/internal/testing/testcert"
)

// BenchmarkCheckTLS measures the cost of TLS per request of the HTTP
// API: one check of a named rule on 10,000 keys over the memory store,
// sent serially over loopback by an HTTP/1.1 client in the same process,
// in plain text and over TLS 1.3 (ECDSA P-256), on one kept-alive
// connection and on a new connection (a full handshake, no resumption)
// per request. Beside ns/op it reports cpu-ns/op, the CPU the process
// spent per request (user and system, from getrusage): both ends' work,
// which on a shared machine is steadier than a rate. The TLS figures
// count the client's half of the cryptography too.
func BenchmarkCheckTLS(b *testing.B) {
	c, err := config.Parse("b.yaml", []byte("rules:\n  - name: api\n    limits: [\"1000/min\"]\n"))
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := NewService(context.Background(), c, Options{Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ca := testcert.NewCA(b)
	pair := ca.Server(b, "server")
	tl, err := NewTLS(config.ServerTLS{CertFile: pair.CertFile, KeyFile: pair.KeyFile, MinVersion: tls.VersionTLS12}, HTTPProtos, log)
	if err != nil {
		b.Fatal(err)
	}
	plain, secure := serveBench(b, s.Handler(), log, nil), serveBench(b, s.Handler(), log, tl.Config())
	bodies := make([]string, 10_000)
	for i := range bodies {
		bodies[i] = fmt.Sprintf(`{"rule":"api","key":"10.0.%d.%d"}`, i/256, i%256)
	}
	for _, keepAlive := range []bool{true, false} {
		for _, tt := range []struct{ name, url string }{{"plain", "http://" + plain}, {"tls", "https://" + secure}} {
			conn := "keepalive"
			if !keepAlive {
				conn = "newconn"
			}
			b.Run(tt.name+"/"+conn, func(b *testing.B) {
				tr := &http.Transport{TLSClientConfig: testcert.ClientConfig(b, ca), DisableKeepAlives: !keepAlive}
				b.Cleanup(tr.CloseIdleConnections)
				benchChecks(b, &http.Client{Transport: tr}, tt.url+"/v1/check", bodies)
			})
		}
	}
}

// serveBench serves h on a loopback port, over TLS when cfg is set, until
// the benchmark ends, and returns the address.
func serveBench(b *testing.B, h http.Handler, log *slog.Logger, cfg *tls.Config) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := NewHTTPServer(h, log)
	hs.TLSConfig = cfg
	go func() {
		if cfg != nil {
			_ = hs.ServeTLS(ln, "", "")
			return
		}
		_ = hs.Serve(ln)
	}()
	b.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String()
}

// benchChecks posts b.N checks to url with cl, and reports cpu-ns/op.
func benchChecks(b *testing.B, cl *http.Client, url string, bodies []string) {
	b.ReportAllocs()
	cpu0 := cputime.Self()
	b.ResetTimer()
	for i := range b.N {
		resp, err := cl.Post(url, "application/json", strings.NewReader(bodies[i%len(bodies)]))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatal(resp.Status)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cputime.Self()-cpu0)/float64(b.N), "cpu-ns/op")
}
