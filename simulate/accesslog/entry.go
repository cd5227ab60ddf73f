package accesslog

import (
	"errors"
	"time"
)

// An Entry is one request of an access log, as its line records it. The
// byte slices point into the line (or into a buffer the reader reuses):
// they are valid until the reader's next batch. Fields the format does
// not log are empty.
type Entry struct {
	// Time is when the request was logged, in Unix nanoseconds.
	Time int64
	// Addr is the client's address as logged ($remote_addr), without
	// port.
	Addr []byte
	// Forwarded is the X-Forwarded-For header the request came with,
	// when the format logs it.
	Forwarded []byte
	// User is the authenticated user ($remote_user), "-" made empty.
	User []byte
	// Method, URI and Proto are the parts of the request line.
	Method, URI, Proto []byte
	// Host is the Host header, or the virtual host.
	Host []byte
	// Referer and UserAgent are the request's headers of those names.
	Referer, UserAgent []byte
	// Status is the response status, 0 when not logged.
	Status int
	// Source is the index of the file the entry came from, Line its
	// line number there (from 1).
	Source int
	Line   int64
}

// TimeOf returns e.Time as a time.Time in UTC.
func (e *Entry) TimeOf() time.Time { return time.Unix(0, e.Time).UTC() }

// A Parser parses one line (without its newline) into e, or returns why
// it cannot. It sets every field of e it knows, and must not keep line.
type Parser interface {
	Parse(line []byte, e *Entry) error
}

// Errors of the parsers, wrapped with the detail.
var (
	// ErrMalformed means a line is not of the format.
	ErrMalformed = errors.New("malformed line")
	// ErrTooLong means a line is longer than the reader's cap.
	ErrTooLong = errors.New("line too long")
	// ErrUnknownFormat means Detect could not tell the format.
	ErrUnknownFormat = errors.New("unknown log format")
)
