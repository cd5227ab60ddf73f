package accesslog

import (
	"bytes"
	"fmt"
)

// Combined parses the NCSA combined and common log formats of nginx and
// Apache (see the package documentation). It allocates nothing. A
// Combined caches the last timestamp it converted, so it is not safe for
// concurrent use: give each goroutine its own. The zero value is ready
// to use.
type Combined struct {
	lastStamp [26]byte // the last "[...]" converted, and its time
	lastTime  int64
}

var _ Parser = (*Combined)(nil)

// The reasons a line is not combined, allocated once.
var (
	errFields      = fmt.Errorf("%w: want \"host ident user [time] \\\"request\\\" status bytes\"", ErrMalformed)
	errTime        = fmt.Errorf("%w: time not [dd/Mon/yyyy:hh:mm:ss +zzzz]", ErrMalformed)
	errQuote       = fmt.Errorf("%w: unterminated quoted field", ErrMalformed)
	errRequestLine = fmt.Errorf("%w: request line not \"METHOD URI [PROTO]\"", ErrMalformed)
	errStatus      = fmt.Errorf("%w: status not three digits", ErrMalformed)
)

// Parse parses a combined or common line into e.
func (c *Combined) Parse(line []byte, e *Entry) error {
	*e = Entry{Source: e.Source, Line: e.Line}
	open := bytes.IndexByte(line, '[')
	if open < 0 {
		return errFields
	}
	if err := e.parsePrefix(line[:open]); err != nil {
		return err
	}
	rest := line[open+1:]
	if len(rest) < 27 || rest[26] != ']' {
		return errTime
	}
	t, ok := c.time(rest[:26])
	if !ok {
		return errTime
	}
	e.Time = t
	rest = rest[27:]
	req, rest, ok := quoted(rest)
	if !ok {
		return errQuote
	}
	if !e.parseRequestLine(req) {
		return errRequestLine
	}
	return e.parseTail(rest)
}

// parsePrefix parses "[vhost:port ]host ident user " into e.
func (e *Entry) parsePrefix(p []byte) error {
	var f [5][]byte
	n := 0
	for len(p) > 0 {
		i := bytes.IndexByte(p, ' ')
		if i < 0 {
			return errFields // the prefix ends with the space before '['
		}
		if i > 0 {
			if n == len(f) {
				return errFields
			}
			f[n] = p[:i]
			n++
		}
		p = p[i+1:]
	}
	switch n {
	case 3:
	case 4: // Apache's vhost_combined: "%v:%p " first
		host := f[0]
		if i := bytes.LastIndexByte(host, ':'); i > 0 {
			host = host[:i]
		}
		e.Host = host
		f[0], f[1], f[2] = f[1], f[2], f[3]
	default:
		return errFields
	}
	e.Addr, e.User = f[0], dash(f[2])
	return nil
}

// parseRequestLine splits "METHOD URI [PROTO]" into e.
func (e *Entry) parseRequestLine(r []byte) bool {
	sp := bytes.IndexByte(r, ' ')
	if sp < 1 || sp > 20 || !isToken(r[:sp]) {
		return false
	}
	e.Method, r = r[:sp], r[sp+1:]
	if i := bytes.LastIndexByte(r, ' '); i >= 0 && bytes.HasPrefix(r[i+1:], []byte("HTTP/")) {
		e.URI, e.Proto = r[:i], r[i+1:]
	} else {
		e.URI = r
	}
	return len(e.URI) > 0 && bytes.IndexByte(e.URI, ' ') < 0
}

// parseTail parses " status bytes[ \"referer\" \"agent\"[ \"xff\"]]".
func (e *Entry) parseTail(rest []byte) error {
	if len(rest) < 4 || rest[0] != ' ' || !isDigit(rest[1]) || !isDigit(rest[2]) || !isDigit(rest[3]) || (len(rest) > 4 && rest[4] != ' ') {
		return errStatus
	}
	e.Status = int(rest[1]-'0')*100 + int(rest[2]-'0')*10 + int(rest[3]-'0')
	rest = rest[4:]
	var q [3][]byte
	for i := range q {
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			break
		}
		var ok bool
		if q[i], rest, ok = quoted(rest[j+1:]); !ok {
			return errQuote
		}
	}
	e.Referer, e.UserAgent, e.Forwarded = dash(q[0]), dash(q[1]), dash(q[2])
	return nil
}

// quoted returns the quoted field that p starts just inside of (its
// closing quote unescaped, backslash escapes skipped), and what follows
// the closing quote.
func quoted(p []byte) (field, rest []byte, ok bool) {
	if len(p) > 0 && p[0] == ' ' {
		p = p[1:]
	}
	if len(p) > 0 && p[0] == '"' {
		p = p[1:]
	}
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '"':
			return p[:i], p[i+1:], true
		}
	}
	return nil, nil, false
}

// dash returns f, or nil for the "-" of a field not logged.
func dash(f []byte) []byte {
	if len(f) == 1 && f[0] == '-' {
		return nil
	}
	return f
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

// isToken reports whether m is an HTTP method: letters, digits, '-'
// and '_'.
func isToken(m []byte) bool {
	for _, b := range m {
		if !('A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || isDigit(b) || b == '-' || b == '_') {
			return false
		}
	}
	return true
}
