package accesslog

import (
	"errors"
	"testing"
	"time"
)

func TestJSONFormats(t *testing.T) {
	at := time.Date(2026, 3, 9, 21, 30, 1, 500_000_000, time.UTC)
	tests := []struct {
		name, format, line string
		want               Entry
	}{
		{
			name: "caddy", format: "caddy",
			line: `{"level":"info","ts":1773091801.5,"logger":"http.log.access","msg":"handled request","request":{"remote_ip":"10.0.0.2","remote_port":"41342","client_ip":"203.0.113.9","proto":"HTTP/2.0","method":"GET","host":"example.com","uri":"/x?y","headers":{"User-Agent":["curl/8.0"],"X-Forwarded-For":["203.0.113.9"]}},"user_id":"","status":200}`,
			want: Entry{Addr: b("203.0.113.9"), Forwarded: b("203.0.113.9"), Method: b("GET"), URI: b("/x?y"), Proto: b("HTTP/2.0"), Host: b("example.com"), UserAgent: b("curl/8.0"), Status: 200},
		},
		{
			name: "envoy", format: "envoy",
			line: `{"start_time":"2026-03-09T21:30:01.500Z","method":"POST","path":"/login","protocol":"HTTP/1.1","response_code":429,"downstream_remote_address":"[2001:db8::7]:5555","x_forwarded_for":null,"user_agent":"ua","authority":"api.example.com"}`,
			want: Entry{Addr: b("2001:db8::7"), Method: b("POST"), URI: b("/login"), Proto: b("HTTP/1.1"), Host: b("api.example.com"), UserAgent: b("ua"), Status: 429},
		},
		{
			name: "traefik", format: "traefik",
			line: `{"ClientAddr":"192.0.2.4:1234","ClientHost":"192.0.2.4","ClientUsername":"-","DownstreamStatus":404,"RequestMethod":"GET","RequestPath":"/nope","RequestProtocol":"HTTP/1.1","RequestHost":"w","StartUTC":"2026-03-09T21:30:01.5Z","request_User-Agent":"Mozilla"}`,
			want: Entry{Addr: b("192.0.2.4"), Method: b("GET"), URI: b("/nope"), Proto: b("HTTP/1.1"), Host: b("w"), UserAgent: b("Mozilla"), Status: 404},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Detect([]byte(tt.line))
			if err != nil || f.Name != tt.format {
				t.Fatalf("Detect = %q, %v, want %q", f.Name, err, tt.format)
			}
			var e Entry
			if err := f.NewParser().Parse([]byte(tt.line), &e); err != nil {
				t.Fatalf("Parse = %v", err)
			}
			tt.want.Time = at.UnixNano()
			if got := describe(&e); got != describe(&tt.want) {
				t.Errorf("Parse =\n %s\nwant\n %s", got, describe(&tt.want))
			}
		})
	}
}

func TestJSONMapping(t *testing.T) {
	m, err := ParseMapping("time=t,addr=c.ip,uri=u,method=m,user=who")
	if err != nil {
		t.Fatal(err)
	}
	p := NewJSON(m)
	var e Entry
	if err := p.Parse([]byte(`{"t":1773091801500,"c":{"ip":"192.0.2.9"},"u":"/a","m":"GET","who":"carol"}`), &e); err != nil {
		t.Fatal(err)
	}
	if got, want := describe(&e), `time=2026-03-09T21:30:01.5Z addr="192.0.2.9" fwd="" user="carol" method="GET" uri="/a" proto="" host="" ref="" ua="" status=0`; got != want {
		t.Errorf("Parse = %s, want %s", got, want)
	}
	for _, bad := range []string{`[1,2]`, `{"t":"yesterday","c":{"ip":"1.2.3.4"}}`, `{"t":1}`, `{"t":1e400,"c":{"ip":"x"}}`, `null`, "{\"t\":1,\"c\":{\"ip\":\"x\"}"} {
		if err := p.Parse([]byte(bad), &e); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) = %v, want ErrMalformed", bad, err)
		}
	}
	for _, bad := range []string{"", "addr=x", "time=t,addr=a,colour=c", "time"} {
		if _, err := ParseMapping(bad); err == nil {
			t.Errorf("ParseMapping(%q) = nil error", bad)
		}
	}
}

func TestDetectUnknown(t *testing.T) {
	for _, line := range []string{`{"a":1}`, `{not json`, "hello world", "\x00\x01\x02"} {
		if _, err := Detect([]byte(line)); !errors.Is(err, ErrUnknownFormat) {
			t.Errorf("Detect(%q) = %v, want ErrUnknownFormat", line, err)
		}
	}
}

func FuzzJSON(f *testing.F) {
	f.Add(`{"ts":1773091801.5,"request":{"client_ip":"1.2.3.4","headers":{"User-Agent":["a"]}},"status":200}`)
	f.Add(`{"ts":"10/Oct/2026:13:55:36 -0700","request":{"client_ip":"[::1]:80"}}`)
	f.Add(`{"ts":[],"request":{"client_ip":{}}}`)
	p := NewJSON(Caddy)
	f.Fuzz(func(t *testing.T, line string) {
		var e Entry
		if err := p.Parse([]byte(line), &e); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse(%q) = %v, not ErrMalformed", line, err)
			}
			return
		}
		if len(e.Addr) == 0 {
			t.Fatalf("Parse(%q) accepted an entry without address", line)
		}
		_, _ = Detect([]byte(line))
	})
}
