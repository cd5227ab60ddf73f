package accesslog

import (
	"errors"
	"testing"
	"time"
)

func TestCombinedParse(t *testing.T) {
	tests := []struct {
		name, line string
		want       Entry
		at         time.Time
	}{
		{
			name: "nginx combined",
			line: `203.0.113.7 - alice [10/Oct/2026:13:55:36 -0700] "GET /a?b=1 HTTP/1.1" 200 2326 "https://example.com/" "curl/8.0"`,
			want: Entry{Addr: b("203.0.113.7"), User: b("alice"), Method: b("GET"), URI: b("/a?b=1"), Proto: b("HTTP/1.1"), Status: 200, Referer: b("https://example.com/"), UserAgent: b("curl/8.0")},
			at:   time.Date(2026, 10, 10, 20, 55, 36, 0, time.UTC),
		},
		{
			name: "nginx main with X-Forwarded-For, east of UTC",
			line: `2001:db8::1 - - [01/Jan/2026:00:30:00 +0130] "POST /login HTTP/2.0" 429 0 "-" "bot" "198.51.100.1, 10.0.0.1"`,
			want: Entry{Addr: b("2001:db8::1"), Method: b("POST"), URI: b("/login"), Proto: b("HTTP/2.0"), Status: 429, UserAgent: b("bot"), Forwarded: b("198.51.100.1, 10.0.0.1")},
			at:   time.Date(2025, 12, 31, 23, 0, 0, 0, time.UTC),
		},
		{
			name: "common",
			line: `192.0.2.1 - - [29/Feb/2024:23:59:60 +0000] "HEAD / HTTP/1.0" 304 -`,
			want: Entry{Addr: b("192.0.2.1"), Method: b("HEAD"), URI: b("/"), Proto: b("HTTP/1.0"), Status: 304},
			at:   time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC),
		},
		{
			name: "apache vhost_combined, escaped quote in the agent",
			line: `www.example.com:443 192.0.2.2 - bob [05/Mar/2026:08:00:00 +0000] "GET /x HTTP/1.1" 200 5 "-" "say \"hi\""`,
			want: Entry{Host: b("www.example.com"), Addr: b("192.0.2.2"), User: b("bob"), Method: b("GET"), URI: b("/x"), Proto: b("HTTP/1.1"), Status: 200, UserAgent: b(`say \"hi\"`)},
			at:   time.Date(2026, 3, 5, 8, 0, 0, 0, time.UTC),
		},
		{
			name: "HTTP/0.9 request line",
			line: `192.0.2.3 - - [05/Mar/2026:08:00:00 +0000] "GET /old" 200 5`,
			want: Entry{Addr: b("192.0.2.3"), Method: b("GET"), URI: b("/old"), Status: 200},
			at:   time.Date(2026, 3, 5, 8, 0, 0, 0, time.UTC),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Combined
			var e Entry
			if err := c.Parse([]byte(tt.line), &e); err != nil {
				t.Fatalf("Parse(%q) = %v", tt.line, err)
			}
			tt.want.Time = tt.at.UnixNano()
			if got := describe(&e); got != describe(&tt.want) {
				t.Errorf("Parse(%q) =\n %s\nwant\n %s", tt.line, got, describe(&tt.want))
			}
		})
	}
}

func TestCombinedMalformed(t *testing.T) {
	tests := []struct{ name, line string }{
		{"empty brackets", `1.2.3.4 - - [] "GET / HTTP/1.1" 200 1`},
		{"no time", `1.2.3.4 - - "GET / HTTP/1.1" 200 1`},
		{"bad month", `1.2.3.4 - - [10/Foo/2026:13:55:36 -0700] "GET / HTTP/1.1" 200 1`},
		{"31 April", `1.2.3.4 - - [31/Apr/2026:13:55:36 -0700] "GET / HTTP/1.1" 200 1`},
		{"zone without sign", `1.2.3.4 - - [10/Oct/2026:13:55:36 0700] "GET / HTTP/1.1" 200 1`},
		{"unterminated request", `1.2.3.4 - - [10/Oct/2026:13:55:36 -0700] "GET / HTTP/1.1 200 1`},
		{"request line of junk", `1.2.3.4 - - [10/Oct/2026:13:55:36 -0700] "\x16\x03\x01" 400 1`},
		{"dash request", `1.2.3.4 - - [10/Oct/2026:13:55:36 -0700] "-" 400 0`},
		{"status not digits", `1.2.3.4 - - [10/Oct/2026:13:55:36 -0700] "GET / HTTP/1.1" OK 1`},
		{"too few fields", `1.2.3.4 [10/Oct/2026:13:55:36 -0700] "GET / HTTP/1.1" 200 1`},
		{"binary", "\x00\xff\xfe[\x01"},
	}
	for _, tt := range tests {
		var c Combined
		var e Entry
		if err := c.Parse([]byte(tt.line), &e); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Parse(%q) = %v, want ErrMalformed", tt.name, tt.line, err)
		}
	}
}

// TestCombinedAllocs checks that the parser allocates nothing.
func TestCombinedAllocs(t *testing.T) {
	line := []byte(`203.0.113.7 - - [10/Oct/2026:13:55:36 -0700] "GET /a HTTP/1.1" 200 2326 "-" "curl/8.0"`)
	var c Combined
	var e Entry
	if n := testing.AllocsPerRun(100, func() { _ = c.Parse(line, &e) }); n != 0 {
		t.Errorf("Parse allocates %v times, want 0", n)
	}
}

func FuzzCombined(f *testing.F) {
	f.Add(`203.0.113.7 - alice [10/Oct/2026:13:55:36 -0700] "GET /a?b=1 HTTP/1.1" 200 2326 "r" "a" "x"`)
	f.Add(`www:80 1.2.3.4 - - [29/Feb/2024:23:59:60 +0000] "GET / HTTP/1.0" 304 -`)
	f.Add(`1.2.3.4 - - [10/Oct/2026:13:55:36 -0700] "GET \" HTTP/1.1" 200 1 "\\`)
	f.Fuzz(func(t *testing.T, line string) {
		var c Combined
		var e Entry
		if err := c.Parse([]byte(line), &e); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse(%q) = %v, not ErrMalformed", line, err)
			}
			return
		}
		if len(e.Addr) == 0 || len(e.Method) == 0 || len(e.URI) == 0 || e.Status < 0 || e.Status > 999 {
			t.Fatalf("Parse(%q) accepted an entry without address, method or URI: %s", line, describe(&e))
		}
	})
}
