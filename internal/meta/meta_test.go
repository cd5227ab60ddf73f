package meta

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testing/testserver"
)

func newClient(t *testing.T) *Client {
	t.Helper()
	s := testserver.StartMemcached(t)
	c := New(Config{Addr: s.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

func do(t *testing.T, c *Client, b *Batch) []Reply {
	t.Helper()
	if err := c.Do(context.Background(), b); err != nil {
		t.Fatalf("Do(%q) = %v", b.buf, err)
	}
	if len(b.Replies) != b.Len() {
		t.Fatalf("Do(%q): %d replies, want %d", b.buf, len(b.Replies), b.Len())
	}
	return b.Replies
}

func counter(t *testing.T, r Reply) uint64 {
	t.Helper()
	if r.Status != StatusValue {
		t.Fatalf("reply %v %q, want VA", r.Status, r.Msg)
	}
	n, err := ParseCounter(r.Value)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCounters(t *testing.T) {
	c := newClient(t)
	var b Batch
	b.IncrCreate("ctr", 5, time.Minute) // created holding 5
	b.IncrCreate("ctr", 3, time.Minute) // 8
	b.Decr("ctr", 6)                    // 2
	b.Get("ctr")
	b.Decr("ctr", 100) // stops at 0
	b.Get("ctr")
	b.Decr("missing", 1)
	b.Get("missing")
	b.Bump("ctr")
	b.Bump("missing")
	b.Exists("ctr")
	b.Exists("missing")
	r := do(t, c, &b)
	want := []Status{StatusValue, StatusValue, StatusOK, StatusValue, StatusOK, StatusValue, StatusNotFound, StatusMiss, StatusOK, StatusMiss, StatusOK, StatusMiss}
	for i, w := range want {
		if r[i].Status != w {
			t.Errorf("reply %d = %v, want %v", i, r[i].Status, w)
		}
	}
	for i, w := range map[int]uint64{0: 5, 1: 8, 3: 2, 5: 0} {
		if got := counter(t, r[i]); got != w {
			t.Errorf("reply %d counter = %d, want %d", i, got, w)
		}
	}
}

func TestCAS(t *testing.T) {
	c := newClient(t)
	var b Batch
	b.Add("cas", []byte("one"), time.Minute)
	b.Add("cas", []byte("two"), time.Minute)
	b.GetCAS("cas")
	r := do(t, c, &b)
	if r[0].Status != StatusOK || r[1].Status != StatusNotStored {
		t.Fatalf("Add, Add = %v, %v, want HD, NS", r[0].Status, r[1].Status)
	}
	if string(r[2].Value) != "one" || r[2].CAS == 0 {
		t.Fatalf("GetCAS = %q cas %d, want \"one\" with a token", r[2].Value, r[2].CAS)
	}
	cas := r[2].CAS
	b.Reset()
	b.CompareAndSet("cas", []byte("three"), time.Minute, cas)
	b.CompareAndSet("cas", []byte("four"), time.Minute, cas) // stale token
	b.CompareAndSet("gone", []byte("x"), time.Minute, cas)
	b.Get("cas")
	b.Delete("cas")
	b.Delete("cas")
	r = do(t, c, &b)
	want := []Status{StatusOK, StatusExists, StatusNotFound, StatusValue, StatusOK, StatusNotFound}
	for i, w := range want {
		if r[i].Status != w {
			t.Errorf("reply %d = %v, want %v", i, r[i].Status, w)
		}
	}
	if string(r[3].Value) != "three" {
		t.Errorf("Get after CAS = %q, want \"three\"", r[3].Value)
	}
}

// TestToken checks that Token reads the CAS token without the value, that
// every write changes it, and that NoExpiry stores an item for good.
func TestToken(t *testing.T) {
	c := newClient(t)
	var b Batch
	b.Token("page")
	b.Add("page", []byte("one"), NoExpiry)
	b.Token("page")
	b.GetCAS("page")
	r := do(t, c, &b)
	if r[0].Status != StatusMiss || r[2].Status != StatusOK || r[2].Value != nil || r[2].CAS == 0 || r[2].CAS != r[3].CAS {
		t.Fatalf("Token, Add, Token, GetCAS = %+v, want EN, then HD with GetCAS's token and no value", r)
	}
	first := r[2].CAS
	b.Reset()
	b.CompareAndSet("page", []byte("two"), NoExpiry, first)
	b.Token("page")
	r = do(t, c, &b)
	if r[0].Status != StatusOK || r[1].CAS == first || r[1].CAS != r[0].CAS {
		t.Errorf("after a write, Token = %d (write's %d), want a new token, the write's", r[1].CAS, r[0].CAS)
	}
	if got := string(b.buf); !strings.Contains(got, "ms page 3 T0 C") {
		t.Errorf("NoExpiry wrote %q, want T0", got)
	}
}

// TestErrorReplies checks that a refused command is an error reply that
// leaves the connection in step for the commands after it.
func TestErrorReplies(t *testing.T) {
	c := newClient(t)
	var b Batch
	b.Set("text", []byte("not a number"), time.Minute)
	b.IncrCreate("text", 1, time.Minute)
	b.Get("text")
	r := do(t, c, &b)
	if r[1].Status != StatusClientError || r[1].Err() == nil {
		t.Errorf("incr of text = %v %q, want CLIENT_ERROR", r[1].Status, r[1].Msg)
	}
	if string(r[2].Value) != "not a number" {
		t.Errorf("Get after refused incr = %q, want the text", r[2].Value)
	}
	if _, err := ParseCounter(r[2].Value); err == nil {
		t.Errorf("ParseCounter(%q) = nil error, want one", r[2].Value)
	}
}

func TestInvalidKeysAreNotSent(t *testing.T) {
	c := newClient(t)
	for _, key := range []string{"", "a b", "a\nb", "a\x00", "é", strings.Repeat("k", 251)} {
		var b Batch
		b.Get("fine")
		b.Get(key)
		if err := c.Do(context.Background(), &b); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Do(Get(%q)) = %v, want ErrInvalidKey", key, err)
		}
	}
	var b Batch
	b.Get(strings.Repeat("k", 250))
	if r := do(t, c, &b); r[0].Status != StatusMiss {
		t.Errorf("Get of a 250-byte key = %v, want EN", r[0].Status)
	}
}

// TestSend checks that fire-and-forget commands are applied and that
// their replies, errors included, do not leak into the next batch.
func TestSend(t *testing.T) {
	c := New(Config{Addr: testserver.StartMemcached(t).Addr, MaxIdle: 1})
	defer c.Close()
	var b Batch
	b.IncrCreate("sent", 10, time.Minute)
	do(t, c, &b)
	for range 3 {
		b.Reset()
		b.Decr("sent", 1)
		b.Decr("sent-missing", 1)
		b.Set("sent-text", []byte("x"), time.Minute)
		b.IncrCreate("sent-text", 1, time.Minute) // CLIENT_ERROR, dropped
		if err := c.Send(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
	b.Reset()
	b.Get("sent")
	if got := counter(t, do(t, c, &b)[0]); got != 7 {
		t.Errorf("counter after 3 sent decrements = %d, want 7", got)
	}
	if got := c.Dropped(); got != 3 {
		t.Errorf("Dropped() = %d, want 3", got)
	}
}

func TestLongTTL(t *testing.T) {
	c := newClient(t)
	var b Batch
	b.IncrCreate("long", 1, 40*24*time.Hour) // past 30 days: sent as a Unix time
	b.Set("long2", []byte("v"), 365*24*time.Hour)
	b.cmd("mg ", "long")
	b.buf = append(b.buf, " t\r\n"...)
	b.cmd("mg ", "long2")
	b.buf = append(b.buf, " t\r\n"...)
	r := do(t, c, &b)
	for _, i := range []int{2, 3} {
		if r[i].Status != StatusOK {
			t.Errorf("item %d = %v, want HD (alive)", i, r[i].Status)
		}
	}
}

// fakeServer answers every connection with reply, or with nothing.
func fakeServer(t *testing.T, reply string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				br := bufio.NewReader(nc)
				if _, err := br.ReadString('\n'); err != nil {
					return
				}
				if reply != "" {
					fmt.Fprint(nc, reply)
				}
				nc.SetReadDeadline(time.Now().Add(5 * time.Second))
				br.ReadString('\n') // hold the connection open
			}()
		}
	}()
	return l.Addr().String()
}

func TestBadServers(t *testing.T) {
	for _, tc := range []struct{ name, reply string }{
		{"garbage", "HELLO WORLD\r\n"},
		{"bare LF", "HD\n"},
		{"value too short", "VA 10\r\nabc\r\n"},
		{"huge value", "VA 999999999999\r\n"},
		{"no CRLF after value", "VA 3\r\nabcXY"},
		{"bad CAS", "VA 1 cX\r\n1\r\n"},
		{"binary", "\x81\x00\x00\x00\r\n"},
		{"hangs", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{Addr: fakeServer(t, tc.reply), Timeout: 200 * time.Millisecond})
			defer c.Close()
			var b Batch
			b.Get("k")
			err := c.Do(context.Background(), &b)
			if err == nil {
				t.Fatalf("Do against a server answering %q = nil, want an error", tc.reply)
			}
			var ne net.Error
			if tc.reply == "" && !(errors.As(err, &ne) && ne.Timeout()) {
				t.Errorf("Do against a hung server = %v, want a timeout", err)
			}
			if tc.reply != "" && !errors.Is(err, ErrProtocol) {
				t.Errorf("Do against %q = %v, want ErrProtocol", tc.reply, err)
			}
		})
	}
}

func TestContextCancel(t *testing.T) {
	c := New(Config{Addr: fakeServer(t, ""), Timeout: 5 * time.Second})
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var b Batch
	b.Get("k")
	time.AfterFunc(50*time.Millisecond, cancel)
	if err := c.Do(ctx, &b); !errors.Is(err, context.Canceled) {
		t.Errorf("Do with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestParseHeader(t *testing.T) {
	for _, tc := range []struct {
		line   string
		status Status
		size   int
		cas    uint64
		bad    bool
	}{
		{line: "HD", status: StatusOK},
		{line: "EN", status: StatusMiss},
		{line: "MN", status: StatusNoOp},
		{line: "VA 12 c77 t30", status: StatusValue, size: 12, cas: 77},
		{line: "HD c18446744073709551615", status: StatusOK, cas: 1<<64 - 1},
		{line: "CLIENT_ERROR bad data chunk", status: StatusClientError},
		{line: "SERVER_ERROR out of memory", status: StatusServerError},
		{line: "ERROR", status: StatusError},
		{line: "HD ", bad: true},
		{line: "HD  c1", bad: true},
		{line: "VA", bad: true},
		{line: "VA -1", bad: true},
		{line: "HD c18446744073709551616", bad: true},
		{line: "XX", bad: true},
		{line: "HDc1", bad: true},
		{line: "ERRORS", bad: true},
		{line: "HD 1", bad: true},
	} {
		r, size, err := parseHeader([]byte(tc.line))
		if (err != nil) != tc.bad {
			t.Errorf("parseHeader(%q) error = %v, want error %v", tc.line, err, tc.bad)
			continue
		}
		if !tc.bad && (r.Status != tc.status || size != tc.size || r.CAS != tc.cas) {
			t.Errorf("parseHeader(%q) = %v size %d cas %d, want %v size %d cas %d", tc.line, r.Status, size, r.CAS, tc.status, tc.size, tc.cas)
		}
	}
}

// FuzzReadReply feeds arbitrary bytes to the reply parser: it must return
// replies or errors, never panic, and never return a value longer than
// the input.
func FuzzReadReply(f *testing.F) {
	for _, s := range []string{"HD\r\n", "VA 2 c5\r\n10\r\nEN\r\n", "VA 3\r\nab\r\n", "CLIENT_ERROR x\r\nMN\r\n", "VA 99999999\r\n", "NF c1 t2\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		br := bufio.NewReaderSize(strings.NewReader(string(in)), 64)
		var vals []byte
		for range 100 {
			r, v, err := readReply(br, vals)
			if err != nil {
				return
			}
			vals = v
			if len(r.Value) > len(in) {
				t.Fatalf("value of %d bytes from %d bytes of input", len(r.Value), len(in))
			}
			if r.Status < StatusValue || r.Status > StatusError {
				t.Fatalf("status %v out of range", r.Status)
			}
		}
	})
}
