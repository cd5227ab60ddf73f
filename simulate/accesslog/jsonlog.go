package accesslog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// A Mapping names where each field of an Entry is in a JSON access log
// line: a dotted path of object keys ("request.headers.User-Agent"), or
// several separated by '|', the first present winning. An array value
// gives its first element (Caddy logs headers as arrays). Empty: not
// logged. Time and Addr are required.
//
// Times may be numbers of seconds since the Unix epoch (with a fraction;
// milliseconds, microseconds and nanoseconds are told by their
// magnitude), or strings in RFC 3339 or the combined log's
// "02/Jan/2006:15:04:05 -0700". Addresses may carry a port.
type Mapping struct {
	Time, Addr, Forwarded, User, Method, URI, Proto, Host, Referer, UserAgent, Status string
}

// The mappings of the JSON access logs of well-known proxies.
var (
	// Caddy is the mapping of Caddy's access log (http.log.access).
	Caddy = Mapping{
		Time: "ts", Addr: "request.client_ip|request.remote_ip", Forwarded: "request.headers.X-Forwarded-For",
		User: "user_id", Method: "request.method", URI: "request.uri", Proto: "request.proto", Host: "request.host",
		Referer: "request.headers.Referer", UserAgent: "request.headers.User-Agent", Status: "status",
	}
	// Envoy is the mapping of Envoy's access log with json_format keys
	// named after its command operators, as Envoy's documentation shows.
	Envoy = Mapping{
		Time: "start_time", Addr: "downstream_remote_address|downstream_direct_remote_address", Forwarded: "x_forwarded_for",
		Method: "method", URI: "path", Proto: "protocol", Host: "authority", Referer: "referer",
		UserAgent: "user_agent", Status: "response_code",
	}
	// Traefik is the mapping of Traefik's access log in JSON (request
	// headers appear when its accessLog.fields.headers keep them).
	Traefik = Mapping{
		Time: "StartUTC|time", Addr: "ClientHost|ClientAddr", Forwarded: "request_X-Forwarded-For", User: "ClientUsername",
		Method: "RequestMethod", URI: "RequestPath", Proto: "RequestProtocol", Host: "RequestHost",
		Referer: "request_Referer", UserAgent: "request_User-Agent", Status: "DownstreamStatus",
	}
)

// ParseMapping reads a mapping written "time=ts,addr=client.ip,…" with
// the field names time, addr, forwarded, user, method, uri, proto, host,
// referer, agent and status.
func ParseMapping(s string) (Mapping, error) {
	var m Mapping
	fields := map[string]*string{
		"time": &m.Time, "addr": &m.Addr, "forwarded": &m.Forwarded, "user": &m.User, "method": &m.Method,
		"uri": &m.URI, "proto": &m.Proto, "host": &m.Host, "referer": &m.Referer, "agent": &m.UserAgent, "status": &m.Status,
	}
	for part := range strings.SplitSeq(s, ",") {
		name, path, ok := strings.Cut(strings.TrimSpace(part), "=")
		p := fields[name]
		if !ok || p == nil || path == "" {
			return m, fmt.Errorf("field mapping %q: want NAME=PATH with NAME one of time, addr, forwarded, user, method, uri, proto, host, referer, agent, status", part)
		}
		*p = path
	}
	if m.Time == "" || m.Addr == "" {
		return m, fmt.Errorf("field mapping %q: time and addr are required", s)
	}
	return m, nil
}

// JSON parses JSON lines through a Mapping. It is safe for concurrent
// use; each Entry it fills holds bytes of its own.
type JSON struct {
	m     Mapping
	paths [11][][]string // per field: alternatives, each split on '.'
}

var _ Parser = (*JSON)(nil)

// NewJSON returns the parser of JSON lines mapped by m.
func NewJSON(m Mapping) *JSON {
	j := &JSON{m: m}
	for i, p := range []string{m.Time, m.Addr, m.Forwarded, m.User, m.Method, m.URI, m.Proto, m.Host, m.Referer, m.UserAgent, m.Status} {
		if p == "" {
			continue
		}
		for alt := range strings.SplitSeq(p, "|") {
			j.paths[i] = append(j.paths[i], strings.Split(alt, "."))
		}
	}
	return j
}

var (
	errJSON     = fmt.Errorf("%w: not a JSON object", ErrMalformed)
	errJSONTime = fmt.Errorf("%w: no time, or a time not in seconds, RFC 3339 or dd/Mon/yyyy:hh:mm:ss +zzzz", ErrMalformed)
	errJSONAddr = fmt.Errorf("%w: no client address", ErrMalformed)
)

// Parse parses one JSON line into e.
func (j *JSON) Parse(line []byte, e *Entry) error {
	*e = Entry{Source: e.Source, Line: e.Line}
	var obj map[string]any
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	if err := d.Decode(&obj); err != nil || obj == nil {
		return errJSON
	}
	var ok bool
	if e.Time, ok = jsonTime(j.value(obj, 0)); !ok {
		return errJSONTime
	}
	addr := j.str(obj, 1)
	if ap, err := netip.ParseAddrPort(string(addr)); err == nil {
		addr = []byte(ap.Addr().String())
	}
	if len(addr) == 0 {
		return errJSONAddr
	}
	e.Addr = addr
	e.Forwarded, e.User, e.Method, e.URI = j.str(obj, 2), dash(j.str(obj, 3)), j.str(obj, 4), j.str(obj, 5)
	e.Proto, e.Host, e.Referer, e.UserAgent = j.str(obj, 6), j.str(obj, 7), j.str(obj, 8), j.str(obj, 9)
	if n, err := strconv.Atoi(string(j.str(obj, 10))); err == nil && n > 0 && n < 1000 {
		e.Status = n
	}
	return nil
}

// value returns the value of field i in obj, or nil.
func (j *JSON) value(obj map[string]any, i int) any {
	for _, path := range j.paths[i] {
		var v any = obj
		for _, k := range path {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[k]
		}
		if a, ok := v.([]any); ok {
			v = nil
			if len(a) > 0 {
				v = a[0]
			}
		}
		if v != nil && v != "" {
			return v
		}
	}
	return nil
}

// str returns the value of field i as bytes: a string, or a number's
// text; nil for anything else.
func (j *JSON) str(obj map[string]any, i int) []byte {
	switch v := j.value(obj, i).(type) {
	case string:
		return []byte(v)
	case json.Number:
		return []byte(v)
	}
	return nil
}

// jsonTime converts a JSON time value to Unix nanoseconds.
func jsonTime(v any) (int64, bool) {
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return 0, false
		}
		return unixNumber(f)
	case string:
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return unixNumber(f)
		}
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t.UnixNano(), true
		}
		if len(v) == 26 {
			return parseStamp([]byte(v))
		}
	}
	return 0, false
}

// unixNumber converts a Unix time in seconds, or milliseconds,
// microseconds or nanoseconds by its magnitude, to nanoseconds.
func unixNumber(f float64) (int64, bool) {
	switch a := math.Abs(f); {
	case math.IsNaN(f) || a > 1e19:
		return 0, false
	case a >= 1e17:
		return int64(f), true
	case a >= 1e14:
		return int64(f * 1e3), true
	case a >= 1e11:
		return int64(f * 1e6), true
	}
	return int64(f * 1e9), true
}

// A Format is a log format: its name and a constructor of its parser
// (one per goroutine: a Parser need not be safe for concurrent use).
type Format struct {
	Name      string
	NewParser func() Parser
}

// CombinedFormat is the combined (and common) log format.
var CombinedFormat = Format{Name: "combined", NewParser: func() Parser { return new(Combined) }}

// JSONFormat returns the format of JSON lines mapped by m, named name.
func JSONFormat(name string, m Mapping) Format {
	p := NewJSON(m)
	return Format{Name: name, NewParser: func() Parser { return p }}
}

// FormatNamed returns the format called name: combined, common, caddy,
// envoy, traefik, or json (mapped by m).
func FormatNamed(name string, m Mapping) (Format, error) {
	switch name {
	case "combined", "common":
		return CombinedFormat, nil
	case "caddy":
		return JSONFormat(name, Caddy), nil
	case "envoy":
		return JSONFormat(name, Envoy), nil
	case "traefik":
		return JSONFormat(name, Traefik), nil
	case "json":
		if m.Time == "" || m.Addr == "" {
			return Format{}, fmt.Errorf("%w: -format json needs -fields time=PATH,addr=PATH,…", ErrUnknownFormat)
		}
		return JSONFormat(name, m), nil
	}
	return Format{}, fmt.Errorf("%w %q (want auto, combined, common, caddy, envoy, traefik or json)", ErrUnknownFormat, name)
}

// Detect returns the format of the log whose first line is line: JSON
// lines of Caddy, Traefik or Envoy, or combined (and common) lines; or
// an error wrapping ErrUnknownFormat.
func Detect(line []byte) (Format, error) {
	line = bytes.TrimSpace(line)
	if len(line) > 0 && line[0] == '{' {
		var obj map[string]any
		if json.Unmarshal(line, &obj) != nil {
			return Format{}, fmt.Errorf("%w: the first line starts like JSON but is not a JSON object", ErrUnknownFormat)
		}
		req, _ := obj["request"].(map[string]any)
		switch {
		case req != nil && (req["remote_ip"] != nil || req["client_ip"] != nil):
			return JSONFormat("caddy", Caddy), nil
		case obj["ClientHost"] != nil || obj["ClientAddr"] != nil:
			return JSONFormat("traefik", Traefik), nil
		case obj["downstream_remote_address"] != nil || obj["start_time"] != nil:
			return JSONFormat("envoy", Envoy), nil
		}
		return Format{}, fmt.Errorf("%w: JSON lines of no known proxy: give -format json and -fields time=PATH,addr=PATH,…", ErrUnknownFormat)
	}
	var e Entry
	if err := new(Combined).Parse(line, &e); err != nil {
		return Format{}, fmt.Errorf("%w: the first line is neither combined/common (%v) nor JSON", ErrUnknownFormat, err)
	}
	return CombinedFormat, nil
}
