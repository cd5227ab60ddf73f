package meta

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrProtocol means a server sent something that is not a meta protocol
// reply. The connection is closed: what follows cannot be trusted.
var ErrProtocol = errors.New("meta: protocol error")

// MaxValueLen bounds the value a reply may carry (memcached's default
// largest item is 1 MiB); a longer announced value is a protocol error,
// not an allocation.
const MaxValueLen = 8 << 20

// maxLine bounds a reply's header line. Longer lines are garbage.
const maxLine = 1024

// Status is the code a meta reply starts with.
type Status uint8

// The reply codes of the meta protocol, and the errors the text protocol
// shares with it.
const (
	StatusValue       Status = iota + 1 // VA: a value follows
	StatusOK                            // HD: done, or hit without a value
	StatusMiss                          // EN: mg found no item
	StatusNotFound                      // NF: ma, md or ms with C found no item
	StatusNotStored                     // NS: ms with ME found the key taken
	StatusExists                        // EX: the CAS token did not match
	StatusNoOp                          // MN: answer to mn
	StatusClientError                   // CLIENT_ERROR: the command was refused
	StatusServerError                   // SERVER_ERROR: the server failed it
	StatusError                         // ERROR: unknown command
)

var statusNames = [...]string{"", "VA", "HD", "EN", "NF", "NS", "EX", "MN", "CLIENT_ERROR", "SERVER_ERROR", "ERROR"}

func (s Status) String() string {
	if int(s) < len(statusNames) && s != 0 {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", s)
}

// A Reply is a server's answer to one command.
type Reply struct {
	Status Status
	// Value is the data of a VA reply. It aliases the Batch's buffer and
	// is valid until the Batch is reset.
	Value []byte
	// CAS is the item's CAS token, when the command asked for it (c).
	CAS uint64
	// Msg is the text of an error reply.
	Msg string
}

// Err returns nil for a reply of the protocol's vocabulary, and an error
// for CLIENT_ERROR, SERVER_ERROR and ERROR.
func (r *Reply) Err() error {
	switch r.Status {
	case StatusClientError, StatusServerError, StatusError:
		return &ServerError{Status: r.Status, Msg: r.Msg}
	}
	return nil
}

// A ServerError is an error reply: the server refused or failed one
// command, and the connection is still in step.
type ServerError struct {
	Status Status
	Msg    string
}

func (e *ServerError) Error() string {
	if e.Msg == "" {
		return "memcached: " + e.Status.String()
	}
	return "memcached: " + e.Status.String() + " " + e.Msg
}

// readReply reads one reply from r, appending a VA value to vals. A reply
// that breaks the protocol returns an error wrapping ErrProtocol (or the
// read error), after which the stream is out of step.
func readReply(r *bufio.Reader, vals []byte) (Reply, []byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) || (errors.Is(err, io.EOF) && len(line) > 0) {
			return Reply{}, vals, fmt.Errorf("%w: reply line too long or cut off", ErrProtocol)
		}
		return Reply{}, vals, err
	}
	if len(line) > maxLine || len(line) < 4 || line[len(line)-2] != '\r' {
		return Reply{}, vals, fmt.Errorf("%w: malformed line %q", ErrProtocol, clip(line))
	}
	line = line[:len(line)-2]
	rep, size, err := parseHeader(line)
	if err != nil || rep.Status != StatusValue {
		return rep, vals, err
	}
	start := len(vals)
	vals = append(vals, make([]byte, size+2)...)
	if _, err := io.ReadFull(r, vals[start:]); err != nil {
		return Reply{}, vals[:start], fmt.Errorf("%w: value cut off: %w", ErrProtocol, err)
	}
	if vals[len(vals)-2] != '\r' || vals[len(vals)-1] != '\n' {
		return Reply{}, vals[:start], fmt.Errorf("%w: value of %d bytes not followed by CRLF", ErrProtocol, size)
	}
	vals = vals[:len(vals)-2]
	rep.Value = vals[start:len(vals):len(vals)]
	return rep, vals, nil
}

// parseHeader parses a reply line without its CRLF, returning the size of
// a VA reply's value.
func parseHeader(line []byte) (Reply, int, error) {
	var rep Reply
	for _, e := range [...]struct {
		prefix string
		status Status
	}{{"CLIENT_ERROR", StatusClientError}, {"SERVER_ERROR", StatusServerError}, {"ERROR", StatusError}} {
		if rest, ok := bytes.CutPrefix(line, []byte(e.prefix)); ok && (len(rest) == 0 || rest[0] == ' ') {
			rep.Status = e.status
			rep.Msg = string(bytes.TrimPrefix(rest, []byte(" ")))
			return rep, 0, nil
		}
	}
	if len(line) < 2 || (len(line) > 2 && line[2] != ' ') || line[len(line)-1] == ' ' {
		return rep, 0, fmt.Errorf("%w: malformed line %q", ErrProtocol, clip(line))
	}
	code, rest := string(line[:2]), line[min(len(line), 3):]
	for s := StatusValue; s <= StatusNoOp; s++ {
		if statusNames[s] == code {
			rep.Status = s
		}
	}
	if rep.Status == 0 {
		return rep, 0, fmt.Errorf("%w: unknown reply %q", ErrProtocol, clip(line))
	}
	size := 0
	if rep.Status == StatusValue {
		tok, after, _ := bytes.Cut(rest, []byte(" "))
		n, ok := parseUint(tok)
		if !ok || n > MaxValueLen {
			return rep, 0, fmt.Errorf("%w: bad value size in %q", ErrProtocol, clip(line))
		}
		size, rest = int(n), after
	}
	for len(rest) > 0 {
		var tok []byte
		tok, rest, _ = bytes.Cut(rest, []byte(" "))
		if len(tok) == 0 || tok[0] < 'A' || (tok[0] > 'Z' && tok[0] < 'a') || tok[0] > 'z' {
			return rep, 0, fmt.Errorf("%w: bad flag in %q", ErrProtocol, clip(line))
		}
		if tok[0] == 'c' {
			n, ok := parseUint(tok[1:])
			if !ok {
				return rep, 0, fmt.Errorf("%w: bad CAS token in %q", ErrProtocol, clip(line))
			}
			rep.CAS = n
		}
	}
	return rep, size, nil
}

// parseUint parses a non-empty run of decimal digits that fits a uint64.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// ParseCounter reads a counter's value as ma and incr leave it: decimal
// digits, followed by the spaces memcached pads with after a decrement
// shortens the number in place.
func ParseCounter(v []byte) (uint64, error) {
	n, ok := parseUint(bytes.TrimRight(v, " "))
	if !ok {
		return 0, fmt.Errorf("value %q is not a counter", clip(v))
	}
	return n, nil
}

func clip(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
