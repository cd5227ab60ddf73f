package simulate

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestProgressLine(t *testing.T) {
	tests := []struct {
		lines, read, total int64
		elapsed            time.Duration
		want               string
	}{
		{1000, 512 << 10, 2 << 20, time.Second, "1000 lines, 1000 lines/s, 512.0 KiB read of 2.0 MiB (25%), ETA 3s"},
		{3_000_000, 3 << 30, 0, 2 * time.Second, "3000000 lines, 1500000 lines/s, 3.0 GiB read"}, // stdin: no ETA
	}
	for _, tt := range tests {
		p := &progress{total: tt.total}
		p.lines.Store(tt.lines)
		p.bytes.Store(tt.read)
		if got := p.line(tt.elapsed); got != tt.want {
			t.Errorf("line = %q, want %q", got, tt.want)
		}
	}
	var out bytes.Buffer
	stop := (&progress{}).start(&out)
	stop()
	if !strings.HasSuffix(out.String(), "\r\033[K") {
		t.Errorf("progress left %q, want the line cleared", out.String())
	}
}

// TestRunJSONLines replays Caddy's JSON access log, a client behind a
// trusted proxy, and a line that is not JSON.
func TestRunJSONLines(t *testing.T) {
	cfg := parseConfig(t, `rules:
  - name: api
    limits: ["1/min fixed"]
forward_auth:
  trusted_proxies: [10.0.0.0/8]
`)
	line := func(ts, remote, xff string) string {
		return `{"ts":` + ts + `,"request":{"remote_ip":"` + remote + `","client_ip":"` + remote + `","method":"GET","uri":"/a","headers":{"X-Forwarded-For":["` + xff + `"]}},"status":200}`
	}
	log := strings.Join([]string{
		line("1767607200.1", "10.0.0.2", "192.0.2.1"), // a trusted proxy: the client is 192.0.2.1
		line("1767607201.1", "10.0.0.3", "192.0.2.1"), // the same client via another proxy: denied
		line("1767607202.1", "10.0.0.3", "192.0.2.2"),
		"{not json",
		line("1767607263.1", "10.0.0.2", "192.0.2.1"), // the next minute
	}, "\n")
	rep, err := Run(context.Background(), Options{Config: Config{Rules: cfg}, Stdin: strings.NewReader(log)})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Rules[0]
	if rep.Requests != 4 || rep.Malformed != 1 || r.WouldDeny != 1 || r.TopDenied[0].Key != "192.0.2.1" || r.Keys != 2 {
		t.Errorf("report: %d requests, %d malformed; rule %+v; want 4, 1, one denial of 192.0.2.1 among 2 keys", rep.Requests, rep.Malformed, r)
	}
}
