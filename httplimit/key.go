package httplimit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"mime"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// A Keyer derives the actor key of a request: the client's address, a
// prefix of it, a header, a hashed form field, or a composition. It
// reports false when no key can be derived; the middleware then limits
// the request under one key shared by every such request, never lets it
// through unlimited.
type Keyer interface {
	Key(r *http.Request) (key string, ok bool)
}

// A Tripper is a Keyer that wants to know when a request under one of its
// keys was denied, to widen its keys under attack, say. The middleware
// calls Trip once per denial, with the request's context.
type Tripper interface {
	Keyer
	Trip(r *http.Request, key string)
}

// A KeyAppender is a Keyer that can append its key to a buffer instead of
// returning a new string. The middleware keeps the bytes in the
// request's own state, so a key costs no allocation of its own. The
// key's bytes must be those Key would return.
type KeyAppender interface {
	Keyer
	// AppendKey appends the key of r to dst and returns the extended
	// buffer, or reports false when r has no key (dst's contents are then
	// unspecified beyond its length).
	AppendKey(dst []byte, r *http.Request) ([]byte, bool)
}

// appendKey appends k's key of r to dst, through AppendKey when k has it.
func appendKey(dst []byte, k Keyer, r *http.Request) ([]byte, bool) {
	if a, ok := k.(KeyAppender); ok {
		return a.AppendKey(dst, r)
	}
	key, ok := k.Key(r)
	return append(dst, key...), ok
}

// keyString returns a's key of r as a new string.
func keyString(a KeyAppender, r *http.Request) (string, bool) {
	var buf [64]byte
	b, ok := a.AppendKey(buf[:0], r)
	if !ok {
		return "", false
	}
	return string(b), true
}

// KeyFunc adapts a function to a Keyer.
type KeyFunc func(r *http.Request) (string, bool)

// Key calls f(r).
func (f KeyFunc) Key(r *http.Request) (string, bool) { return f(r) }

// IPPrefix keys a request by the network of its client, as c finds it:
// the first v4Bits bits of an IPv4 address and the first v6Bits bits of
// an IPv6 one, such as 203.0.113.0/24 or 2001:db8:1:2::/64. Zero bits
// mean 32 and 64: a host's address and an IPv6 subnet, the smallest unit
// an ISP hands out, since one IPv6 host owns all of its /64.
func IPPrefix(c *ClientIP, v4Bits, v6Bits int) Keyer {
	if v4Bits <= 0 || v4Bits > 32 {
		v4Bits = 32
	}
	if v6Bits <= 0 || v6Bits > 128 {
		v6Bits = 64
	}
	return &ipPrefix{c: c, v4: v4Bits, v6: v6Bits}
}

// ipPrefix is the Keyer IPPrefix returns.
type ipPrefix struct {
	c      *ClientIP
	v4, v6 int
}

var _ KeyAppender = (*ipPrefix)(nil)

func (p *ipPrefix) Key(r *http.Request) (string, bool) { return keyString(p, r) }

func (p *ipPrefix) AppendKey(dst []byte, r *http.Request) ([]byte, bool) {
	a, ok := p.c.Addr(r)
	if !ok {
		return dst, false
	}
	bits := p.v6
	if a.Is4() {
		bits = p.v4
	}
	return appendPrefix(dst, a, bits), true
}

// appendPrefix appends the network of a with the given bits, as
// "203.0.113.0/24".
func appendPrefix(dst []byte, a netip.Addr, bits int) []byte {
	p, _ := a.Prefix(bits) // bits is in range for a's family
	dst = p.Addr().AppendTo(dst)
	dst = append(dst, '/')
	return strconv.AppendInt(dst, int64(bits), 10)
}

// prefixKey formats the network of a with the given bits, as
// "203.0.113.0/24", in one allocation.
func prefixKey(a netip.Addr, bits int) string {
	var buf [64]byte
	return string(appendPrefix(buf[:0], a, bits))
}

// Header keys a request by the value of header name (its first line), such
// as an API key. A request without the header has no key. Values longer
// than sluice.MaxActorLen are hashed by the Limiter.
func Header(name string) Keyer {
	name = http.CanonicalHeaderKey(name)
	return KeyFunc(func(r *http.Request) (string, bool) {
		v := r.Header.Get(name)
		return v, v != ""
	})
}

// Path keys a request by its URL path.
func Path() Keyer {
	return KeyFunc(func(r *http.Request) (string, bool) {
		return r.URL.Path, r.URL.Path != ""
	})
}

// Pattern keys a request by the http.ServeMux pattern that matched it
// ("POST /login"), so that all paths of one route share a key. It needs
// the middleware to wrap the handler registered on the mux, not the mux;
// a request no pattern matched has no key.
func Pattern() Keyer {
	return KeyFunc(func(r *http.Request) (string, bool) {
		return r.Pattern, r.Pattern != ""
	})
}

// DefaultMaxFormBytes bounds the body FormField reads when its MaxBytes
// is zero.
const DefaultMaxFormBytes = 64 << 10

// FormFieldOptions configure FormField. The zero value means defaults.
type FormFieldOptions struct {
	// Secret keys the hash (HMAC-SHA-256), so that whoever reads the
	// store cannot recover usernames by hashing a list of them. Every
	// process sharing a store must use the same secret. Default nil:
	// plain SHA-256.
	Secret []byte
	// MaxBytes bounds the request body read to find the field; a larger
	// body has no key (and the handler sees a body too large). Default
	// DefaultMaxFormBytes.
	MaxBytes int64
	// Normalize maps the value before hashing, so that "Alice " and
	// "alice" are one actor when the application treats them as one.
	// Default strings.ToLower of the value without surrounding spaces.
	Normalize func(string) string
}

// FormField keys a request by a field of its POST form, such as the
// username of a login form, hashed so that no plaintext value sits in the
// store: the unpadded base64url of its SHA-256 (or HMAC-SHA-256 with
// o.Secret). Any bytes are accepted, including invalid UTF-8. A request
// with an empty or missing field, or a body that is not a form or is too
// large, has no key.
//
// It parses the form (r.ParseForm or r.ParseMultipartForm) with the body
// bounded by o.MaxBytes, so the handler finds the fields in r.PostForm
// and r.FormValue, but cannot read r.Body again.
func FormField(name string, o FormFieldOptions) Keyer {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxFormBytes
	}
	if o.Normalize == nil {
		o.Normalize = func(s string) string { return strings.ToLower(strings.TrimSpace(s)) }
	}
	newHash := sha256.New
	if o.Secret != nil {
		secret := append([]byte(nil), o.Secret...)
		newHash = func() hash.Hash { return hmac.New(sha256.New, secret) }
	}
	return &formField{name: name, o: o, newHash: newHash}
}

// formField is the Keyer FormField returns.
type formField struct {
	name    string
	o       FormFieldOptions
	newHash func() hash.Hash
}

var _ KeyAppender = (*formField)(nil)

func (f *formField) Key(r *http.Request) (string, bool) { return keyString(f, r) }

func (f *formField) AppendKey(dst []byte, r *http.Request) ([]byte, bool) {
	v, ok := postFormValue(r, f.name, f.o.MaxBytes)
	if !ok {
		return dst, false
	}
	v = f.o.Normalize(v)
	if v == "" {
		return dst, false
	}
	h := f.newHash()
	h.Write([]byte(v))
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.AppendEncode(dst, h.Sum(sum[:0])), true
}

// postFormValue parses r's form once, with the body bounded by maxBytes.
func postFormValue(r *http.Request, name string, maxBytes int64) (string, bool) {
	if r.PostForm == nil {
		if r.Body != nil {
			r.Body = http.MaxBytesReader(nil, r.Body, maxBytes)
		}
		var err error
		if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "multipart/form-data" {
			err = r.ParseMultipartForm(maxBytes)
		} else {
			err = r.ParseForm()
		}
		if err != nil {
			return "", false
		}
	}
	vs := r.PostForm[name]
	if len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

// Compose keys a request by all of keys together, such as the client's
// address and the username it tries: the composed key exists only when
// every part does. Parts are length-prefixed, so no two different lists
// of parts make the same key.
func Compose(keys ...Keyer) Keyer {
	return composed(append([]Keyer(nil), keys...))
}

// composed is the Keyer Compose returns.
type composed []Keyer

var _ KeyAppender = composed(nil)

func (c composed) Key(r *http.Request) (string, bool) {
	var buf [128]byte
	b, ok := c.AppendKey(buf[:0], r)
	if !ok {
		return "", false
	}
	return string(b), true
}

// AppendKey appends each part after its length: the part goes first, then
// its length is inserted before it.
func (c composed) AppendKey(dst []byte, r *http.Request) ([]byte, bool) {
	for _, k := range c {
		start := len(dst)
		var ok bool
		if dst, ok = appendKey(dst, k, r); !ok {
			return dst, false
		}
		var num [20]byte
		n := strconv.AppendInt(num[:0], int64(len(dst)-start), 10)
		n = append(n, ':')
		dst = append(dst, n...) // grow by len(n)
		copy(dst[start+len(n):], dst[start:len(dst)-len(n)])
		copy(dst[start:], n)
	}
	return dst, true
}
