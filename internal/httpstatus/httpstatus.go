// Package httpstatus records the status code an http.Handler answers
// with, for middleware that acts on it (counting failed logins, metrics),
// without hiding what the server's writer can do.
package httpstatus

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

// A Writer wraps an http.ResponseWriter and records the final status the
// handler sends: the first WriteHeader of 200 or more (1xx interim
// responses such as 103 Early Hints are passed on, not recorded), or 200
// on the first Write, ReadFrom or flush. Give handlers Wrap's writer,
// which keeps the optional interfaces of the wrapped one; the Writer
// itself unwraps for http.ResponseController. The zero value needs
// ResponseWriter set; a Writer is used by one handler at a time.
type Writer struct {
	http.ResponseWriter
	status int
}

// WriteHeader records code, unless it is interim, and sends it.
func (w *Writer) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records 200 if no status was sent, and writes b.
func (w *Writer) Write(b []byte) (int, error) {
	w.sent()
	return w.ResponseWriter.Write(b)
}

// FlushError records 200 if no status was sent, and flushes the
// underlying writer, as http.ResponseController does (which calls it
// whether or not the writer is an http.Flusher).
func (w *Writer) FlushError() error {
	w.sent()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the underlying writer, for http.ResponseController.
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Code returns the status sent, 200 if the handler wrote nothing.
func (w *Writer) Code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// sent records 200 if no status was sent: the headers go with the body.
func (w *Writer) sent() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
}

// Wrap returns w as a writer to give the handler: one that is an
// http.Flusher, http.Hijacker, io.ReaderFrom or http.Pusher exactly when
// w.ResponseWriter is, so that what handlers and libraries find by type
// assertion (a WebSocket upgrader's w.(http.Hijacker), io.Copy's
// ReaderFrom, a stream's Flusher) is what the server gave them, as
// github.com/felixge/httpsnoop keeps it. Each variant is a struct of one
// pointer: Wrap allocates nothing.
func (w *Writer) Wrap() http.ResponseWriter {
	var mask int
	if _, ok := w.ResponseWriter.(http.Flusher); ok {
		mask |= flusher
	}
	if _, ok := w.ResponseWriter.(http.Hijacker); ok {
		mask |= hijacker
	}
	if _, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		mask |= readerFrom
	}
	if _, ok := w.ResponseWriter.(http.Pusher); ok {
		mask |= pusher
	}
	switch mask {
	case flusher:
		return wF{w}
	case hijacker:
		return wH{w}
	case flusher | hijacker:
		return wFH{w}
	case readerFrom:
		return wR{w}
	case flusher | readerFrom:
		return wFR{w}
	case hijacker | readerFrom:
		return wHR{w}
	case flusher | hijacker | readerFrom: // HTTP/1.1's writer
		return wFHR{w}
	case pusher:
		return wP{w}
	case flusher | pusher: // HTTP/2's writer
		return wFP{w}
	case hijacker | pusher:
		return wHP{w}
	case flusher | hijacker | pusher:
		return wFHP{w}
	case readerFrom | pusher:
		return wRP{w}
	case flusher | readerFrom | pusher:
		return wFRP{w}
	case hijacker | readerFrom | pusher:
		return wHRP{w}
	case flusher | hijacker | readerFrom | pusher:
		return wFHRP{w}
	}
	return w
}

// The optional interfaces Wrap keeps, as bits of its mask.
const (
	flusher = 1 << iota
	hijacker
	readerFrom
	pusher
)

func (w *Writer) flush() { _ = w.FlushError() }

func (w *Writer) hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.ResponseWriter.(http.Hijacker).Hijack()
}

func (w *Writer) readFrom(r io.Reader) (int64, error) {
	w.sent()
	return w.ResponseWriter.(io.ReaderFrom).ReadFrom(r)
}

func (w *Writer) push(target string, opts *http.PushOptions) error {
	return w.ResponseWriter.(http.Pusher).Push(target, opts)
}

// The variants of Wrap, named by the interfaces they add: F Flusher, H
// Hijacker, R ReaderFrom, P Pusher.
type (
	wF    struct{ *Writer }
	wH    struct{ *Writer }
	wFH   struct{ *Writer }
	wR    struct{ *Writer }
	wFR   struct{ *Writer }
	wHR   struct{ *Writer }
	wFHR  struct{ *Writer }
	wP    struct{ *Writer }
	wFP   struct{ *Writer }
	wHP   struct{ *Writer }
	wFHP  struct{ *Writer }
	wRP   struct{ *Writer }
	wFRP  struct{ *Writer }
	wHRP  struct{ *Writer }
	wFHRP struct{ *Writer }
)

func (w wF) Flush()                                       { w.flush() }
func (w wH) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.hijack() }
func (w wFH) Flush()                                      { w.flush() }
func (w wFH) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.hijack()
}
func (w wR) ReadFrom(r io.Reader) (int64, error)  { return w.readFrom(r) }
func (w wFR) Flush()                              { w.flush() }
func (w wFR) ReadFrom(r io.Reader) (int64, error) { return w.readFrom(r) }
func (w wHR) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.hijack()
}
func (w wHR) ReadFrom(r io.Reader) (int64, error) { return w.readFrom(r) }
func (w wFHR) Flush()                             { w.flush() }
func (w wFHR) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.hijack()
}
func (w wFHR) ReadFrom(r io.Reader) (int64, error)             { return w.readFrom(r) }
func (w wP) Push(target string, opts *http.PushOptions) error  { return w.push(target, opts) }
func (w wFP) Flush()                                           { w.flush() }
func (w wFP) Push(target string, opts *http.PushOptions) error { return w.push(target, opts) }
func (w wHP) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.hijack()
}
func (w wHP) Push(target string, opts *http.PushOptions) error { return w.push(target, opts) }
func (w wFHP) Flush()                                          { w.flush() }
func (w wFHP) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.hijack()
}
func (w wFHP) Push(target string, opts *http.PushOptions) error { return w.push(target, opts) }
func (w wRP) ReadFrom(r io.Reader) (int64, error)               { return w.readFrom(r) }
func (w wRP) Push(target string, opts *http.PushOptions) error  { return w.push(target, opts) }
func (w wFRP) Flush()                                           { w.flush() }
func (w wFRP) ReadFrom(r io.Reader) (int64, error)              { return w.readFrom(r) }
func (w wFRP) Push(target string, opts *http.PushOptions) error { return w.push(target, opts) }
func (w wHRP) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.hijack()
}
func (w wHRP) ReadFrom(r io.Reader) (int64, error)              { return w.readFrom(r) }
func (w wHRP) Push(target string, opts *http.PushOptions) error { return w.push(target, opts) }
func (w wFHRP) Flush()                                          { w.flush() }
func (w wFHRP) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.hijack()
}
func (w wFHRP) ReadFrom(r io.Reader) (int64, error)              { return w.readFrom(r) }
func (w wFHRP) Push(target string, opts *http.PushOptions) error { return w.push(target, opts) }
