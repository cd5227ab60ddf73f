package httplimit_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testing/testclock"
)

// upgrader answers as an old WebSocket upgrader does: it type-asserts
// the writer to http.Hijacker and writes the 101 on the raw connection.
// It records whether the writer was an io.ReaderFrom and an http.Flusher.
type upgrader struct{ readerFrom, flusher bool }

func (u *upgrader) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, u.readerFrom = w.(io.ReaderFrom)
	_, u.flusher = w.(http.Flusher)
	h, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "no Hijacker", http.StatusInternalServerError)
		return
	}
	conn, rw, err := h.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nhello")
	rw.Flush()
}

// TestWriterInterfacesKept upgrades a connection through a rule that
// counts only some statuses (whose writer records the status) and
// through a concurrency limit, on a real HTTP/1.1 server: the handler
// finds the server's Hijacker, ReaderFrom and Flusher behind both.
func TestWriterInterfacesKept(t *testing.T) {
	c := testclock.New(testclock.T0)
	m := middleware(t, httplimit.Config{Rules: []httplimit.Rule{{
		Name:    "login",
		Limiter: limiter(t, newStore(t), c, "ws", "10/h"),
		Count:   httplimit.Status(http.StatusUnauthorized),
	}}})
	_, cl := newConcurrencyLimit(t, sluice.ConcurrencyConfig{Limit: 2, TTL: time.Minute}, httplimit.ConcurrencyConfig{})
	for _, tt := range []struct {
		name string
		wrap func(http.Handler) http.Handler
	}{
		{"Count rule", m.Handler},
		{"ConcurrencyLimit", cl.Handler},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := &upgrader{}
			srv := httptest.NewServer(tt.wrap(u))
			defer srv.Close()
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			io.WriteString(conn, "GET /chat HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			body := make([]byte, 5)
			io.ReadFull(br, body) // after the 101, the connection is the handler's
			if resp.StatusCode != http.StatusSwitchingProtocols || string(body) != "hello" || !u.readerFrom || !u.flusher {
				t.Errorf("upgrade = %d %q, ReaderFrom %v, Flusher %v; want 101 \"hello\", true, true",
					resp.StatusCode, body, u.readerFrom, u.flusher)
			}
			if strings.Contains(resp.Header.Get("Content-Type"), "problem") {
				t.Errorf("upgrade refused: %v", resp.Header)
			}
		})
	}
}
