package envoyrls_test

// Slow, silent and greedy gRPC clients, each against the bound of
// NewServer that holds it.

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/sluicehq/sluice/internal/testing/rlstest"
	"github.com/sluicehq/sluice/server/envoyrls"
)

// TestAttackSilentConnection connects and says nothing: the server drops
// the connection within HandshakeTimeout.
func TestAttackSilentConnection(t *testing.T) {
	t.Parallel()
	c, err := net.Dial("tcp", rlstest.Listen(t, newService(t, false)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(envoyrls.HandshakeTimeout + 5*time.Second))
	_, err = io.Copy(io.Discard, c)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		t.Fatalf("a silent connection still open after %v, want it closed within %v", time.Since(start), envoyrls.HandshakeTimeout)
	}
}

// handshake opens an HTTP/2 connection to a server from NewServer, and
// returns its framer and the server's settings.
func handshake(t *testing.T) (*http2.Framer, map[http2.SettingID]uint32) {
	t.Helper()
	c, err := net.Dial("tcp", rlstest.Listen(t, newService(t, false)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	settings := map[http2.SettingID]uint32{}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's settings: %v", err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			_ = sf.ForeachSetting(func(s http2.Setting) error { settings[s.ID] = s.Val; return nil })
			if err := fr.WriteSettingsAck(); err != nil {
				t.Fatal(err)
			}
			return fr, settings
		}
	}
}

// TestAttackStreamsBounded checks that the server tells every client how
// many calls one connection may have in flight, and how large its
// headers may be.
func TestAttackStreamsBounded(t *testing.T) {
	_, settings := handshake(t)
	if got := settings[http2.SettingMaxConcurrentStreams]; got != envoyrls.MaxConcurrentStreams {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS = %d, want %d", got, envoyrls.MaxConcurrentStreams)
	}
	if got := settings[http2.SettingMaxHeaderListSize]; got != envoyrls.MaxHeaderListBytes {
		t.Errorf("SETTINGS_MAX_HEADER_LIST_SIZE = %d, want %d", got, envoyrls.MaxHeaderListBytes)
	}
}

// TestAttackPingFlood pings a server as fast as it can: keepalive
// enforcement sends it away (GOAWAY, ENHANCE_YOUR_CALM) after a few.
func TestAttackPingFlood(t *testing.T) {
	fr, _ := handshake(t)
	for i := range 10 {
		if err := fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			break // the server may close first
		}
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no GOAWAY before the connection ended: %v", err)
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			if ga.ErrCode != http2.ErrCodeEnhanceYourCalm {
				t.Errorf("GOAWAY %v, want ENHANCE_YOUR_CALM", ga.ErrCode)
			}
			return
		}
	}
}
