package httpstatus

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// base is a ResponseWriter with no optional interface, which counts the
// calls of the optional ones its variants add.
type base struct {
	h                               http.Header
	flushes, hijacks, reads, pushes int
}

func (b *base) Header() http.Header         { return b.h }
func (b *base) Write(p []byte) (int, error) { return len(p), nil }
func (b *base) WriteHeader(int)             {}

type (
	flushOf  struct{ b *base }
	hijackOf struct{ b *base }
	readOf   struct{ b *base }
	pushOf   struct{ b *base }
)

func (f flushOf) Flush() { f.b.flushes++ }
func (h hijackOf) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h.b.hijacks++
	return nil, nil, nil
}
func (r readOf) ReadFrom(io.Reader) (int64, error)    { r.b.reads++; return 0, nil }
func (p pushOf) Push(string, *http.PushOptions) error { p.b.pushes++; return nil }

// fake returns a writer over b with exactly the optional interfaces of
// mask.
func fake(b *base, mask int) http.ResponseWriter {
	f, h, r, p := flushOf{b}, hijackOf{b}, readOf{b}, pushOf{b}
	switch mask {
	case 0:
		return b
	case flusher:
		return struct {
			*base
			http.Flusher
		}{b, f}
	case hijacker:
		return struct {
			*base
			http.Hijacker
		}{b, h}
	case flusher | hijacker:
		return struct {
			*base
			http.Flusher
			http.Hijacker
		}{b, f, h}
	case readerFrom:
		return struct {
			*base
			io.ReaderFrom
		}{b, r}
	case flusher | readerFrom:
		return struct {
			*base
			http.Flusher
			io.ReaderFrom
		}{b, f, r}
	case hijacker | readerFrom:
		return struct {
			*base
			http.Hijacker
			io.ReaderFrom
		}{b, h, r}
	case flusher | hijacker | readerFrom:
		return struct {
			*base
			http.Flusher
			http.Hijacker
			io.ReaderFrom
		}{b, f, h, r}
	case pusher:
		return struct {
			*base
			http.Pusher
		}{b, p}
	case flusher | pusher:
		return struct {
			*base
			http.Flusher
			http.Pusher
		}{b, f, p}
	case hijacker | pusher:
		return struct {
			*base
			http.Hijacker
			http.Pusher
		}{b, h, p}
	case flusher | hijacker | pusher:
		return struct {
			*base
			http.Flusher
			http.Hijacker
			http.Pusher
		}{b, f, h, p}
	case readerFrom | pusher:
		return struct {
			*base
			io.ReaderFrom
			http.Pusher
		}{b, r, p}
	case flusher | readerFrom | pusher:
		return struct {
			*base
			http.Flusher
			io.ReaderFrom
			http.Pusher
		}{b, f, r, p}
	case hijacker | readerFrom | pusher:
		return struct {
			*base
			http.Hijacker
			io.ReaderFrom
			http.Pusher
		}{b, h, r, p}
	default:
		return struct {
			*base
			http.Flusher
			http.Hijacker
			io.ReaderFrom
			http.Pusher
		}{b, f, h, r, p}
	}
}

// TestWrapKeepsInterfaces checks, for each of the 16 sets of optional
// interfaces a writer may have, that Wrap's writer has exactly that set,
// that each call reaches the writer beneath (recording 200 where it sends
// the headers), and that Wrap allocates nothing.
func TestWrapKeepsInterfaces(t *testing.T) {
	for mask := range 16 {
		b := &base{h: http.Header{}}
		w := &Writer{ResponseWriter: fake(b, mask)}
		got := w.Wrap()
		f, isF := got.(http.Flusher)
		h, isH := got.(http.Hijacker)
		r, isR := got.(io.ReaderFrom)
		p, isP := got.(http.Pusher)
		if isF != (mask&flusher != 0) || isH != (mask&hijacker != 0) || isR != (mask&readerFrom != 0) || isP != (mask&pusher != 0) {
			t.Errorf("mask %04b: Wrap is Flusher %v, Hijacker %v, ReaderFrom %v, Pusher %v", mask, isF, isH, isR, isP)
			continue
		}
		if isR {
			r.ReadFrom(strings.NewReader("x"))
			if b.reads != 1 || w.status != 200 {
				t.Errorf("mask %04b: ReadFrom reached %d times, status %d; want once, 200", mask, b.reads, w.status)
			}
		}
		if isF {
			f.Flush()
			if b.flushes != 1 || w.status != 200 {
				t.Errorf("mask %04b: Flush reached %d times, status %d; want once, 200", mask, b.flushes, w.status)
			}
		}
		if isH {
			h.Hijack()
			if b.hijacks != 1 {
				t.Errorf("mask %04b: Hijack reached %d times, want once", mask, b.hijacks)
			}
		}
		if isP {
			p.Push("/style.css", nil)
			if b.pushes != 1 {
				t.Errorf("mask %04b: Push reached %d times, want once", mask, b.pushes)
			}
		}
		if n := testing.AllocsPerRun(100, func() { _ = w.Wrap() }); n != 0 {
			t.Errorf("mask %04b: Wrap allocates %v times, want 0", mask, n)
		}
	}
}

// TestWrapResponseController checks that http.ResponseController
// reaches what a Wrap writer lacks through Unwrap, and that a flush it
// makes is recorded even when the writer is no Flusher itself.
func TestWrapResponseController(t *testing.T) {
	b := &base{h: http.Header{}}
	inner := struct {
		http.ResponseWriter
		http.Flusher
	}{b, flushOf{b}}
	// A writer that hides the Flusher but unwraps to it, as middleware does.
	hidden := &unwrapper{ResponseWriter: b, inner: inner}
	w := &Writer{ResponseWriter: hidden}
	got := w.Wrap()
	if _, ok := got.(http.Flusher); ok {
		t.Fatal("Wrap of a writer that is no Flusher is one")
	}
	if err := http.NewResponseController(got).Flush(); err != nil || b.flushes != 1 || w.Code() != 200 || w.status != 200 {
		t.Errorf("ResponseController.Flush = %v; flushes %d, status %d; want it to reach the flusher and record 200", err, b.flushes, w.status)
	}
}

type unwrapper struct {
	http.ResponseWriter
	inner http.ResponseWriter
}

func (u *unwrapper) Unwrap() http.ResponseWriter { return u.inner }

// TestWrapRealServers checks Wrap's writer on the writers net/http gives
// handlers: HTTP/1.1's (Flusher, Hijacker, ReaderFrom) and HTTP/2's
// (Flusher, Pusher), and http.ResponseController's deadlines through it.
func TestWrapRealServers(t *testing.T) {
	type seen struct{ flusher, hijacker, readerFrom, pusher, deadline bool }
	for _, tt := range []struct {
		name string
		h2   bool
		want seen
	}{
		{"HTTP/1.1", false, seen{true, true, true, false, true}},
		{"HTTP/2", true, seen{true, false, false, true, true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := make(chan seen, 1)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				sw := &Writer{ResponseWriter: rw}
				w := sw.Wrap()
				var s seen
				_, s.flusher = w.(http.Flusher)
				_, s.hijacker = w.(http.Hijacker)
				_, s.readerFrom = w.(io.ReaderFrom)
				_, s.pusher = w.(http.Pusher)
				s.deadline = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute)) == nil
				got <- s
				w.WriteHeader(http.StatusTeapot)
			}))
			if tt.h2 {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			c := srv.Client()
			if tt.h2 {
				c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
				c.Transport.(*http.Transport).ForceAttemptHTTP2 = true
			}
			resp, err := c.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if s := <-got; s != tt.want || resp.StatusCode != http.StatusTeapot || (resp.ProtoMajor == 2) != tt.h2 {
				t.Errorf("%s: handler saw %+v, status %d over %s; want %+v, 418", tt.name, s, resp.StatusCode, resp.Proto, tt.want)
			}
		})
	}
}
