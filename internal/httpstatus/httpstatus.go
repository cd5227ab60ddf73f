// Package httpstatus records the status code an http.Handler answers
// with, for middleware that acts on it (counting failed logins, metrics).
package httpstatus

import "net/http"

// A Writer wraps an http.ResponseWriter and records the final status the
// handler sends: the first WriteHeader of 200 or more (1xx interim
// responses such as 103 Early Hints are passed on, not recorded), or 200
// on the first Write. It unwraps for http.ResponseController and
// forwards Flush. The zero value needs ResponseWriter set; a Writer is
// used by one handler at a time.
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
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush records 200 if no status was sent, and flushes the underlying
// writer if it can.
func (w *Writer) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
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
