package server

import (
	"log/slog"
	"net/http"
	"time"
)

// Bounds of the HTTP servers NewHTTPServer returns, so that slow, silent
// and greedy clients cost them a bounded amount: a connection that sends
// nothing, or its headers a byte at a time, is dropped after
// ReadHeaderTimeout; one idle between requests after IdleTimeout.
const (
	// ReadHeaderTimeout bounds the time to read a request's headers.
	ReadHeaderTimeout = 5 * time.Second
	// ReadTimeout bounds the time to read a whole request.
	ReadTimeout = 10 * time.Second
	// WriteTimeout bounds the time to write a response.
	WriteTimeout = 10 * time.Second
	// IdleTimeout closes a keep-alive connection idle this long.
	IdleTimeout = 2 * time.Minute
	// MaxHeaderBytes bounds the headers of a request: forward-auth reads
	// a few, the other endpoints fewer.
	MaxHeaderBytes = 64 << 10
)

// NewHTTPServer returns the server sluice serve runs h on (the service's
// listener and the admin listener): the bounds above, and its errors
// (TLS handshakes, malformed requests) logged to log at Warn.
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
