package httplimit_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testing/testclock"
)

func formRequest(body io.Reader, contentType string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/login", body)
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	r.RemoteAddr = "203.0.113.7:1"
	return r
}

func form(v url.Values) *http.Request {
	return formRequest(strings.NewReader(v.Encode()), "application/x-www-form-urlencoded")
}

func TestFormField(t *testing.T) {
	plain := httplimit.FormField("username", httplimit.FormFieldOptions{})
	keyed := httplimit.FormField("username", httplimit.FormFieldOptions{Secret: []byte("s3cret"), MaxBytes: 1024})
	key := func(k httplimit.Keyer, r *http.Request) string {
		t.Helper()
		s, ok := k.Key(r)
		if !ok {
			return "<none>"
		}
		return s
	}
	alice := key(plain, form(url.Values{"username": {"alice"}}))
	if strings.Contains(alice, "alice") || len(alice) != 43 {
		t.Errorf("FormField key %q: want a 43-byte hash without the name", alice)
	}
	for _, same := range []string{"Alice", " ALICE "} {
		if got := key(plain, form(url.Values{"username": {same}})); got != alice {
			t.Errorf("key(%q) = %q, want %q (normalised like alice)", same, got, alice)
		}
	}
	if got := key(keyed, form(url.Values{"username": {"alice"}})); got == alice || got == "<none>" {
		t.Errorf("keyed hash = %q, want one different from the plain hash", got)
	}
	if a, b := key(plain, form(url.Values{"username": {"\xff\xfe"}})), key(plain, form(url.Values{"username": {"bob"}})); a == "<none>" || a == b {
		t.Errorf("non-UTF-8 username: key %q (bob %q), want a distinct key", a, b)
	}
	// The handler still sees the form.
	r := form(url.Values{"username": {"alice"}, "password": {"pw"}})
	key(plain, r)
	if r.FormValue("password") != "pw" {
		t.Errorf("after FormField, FormValue(password) = %q, want pw", r.FormValue("password"))
	}
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	_ = mw.WriteField("username", "alice")
	_ = mw.Close()
	if got := key(plain, formRequest(&mp, mw.FormDataContentType())); got != alice {
		t.Errorf("multipart: key = %q, want %q", got, alice)
	}
	for name, r := range map[string]*http.Request{
		"missing field": form(url.Values{"user": {"alice"}}),
		"empty field":   form(url.Values{"username": {"  "}}),
		"no body":       formRequest(http.NoBody, "application/x-www-form-urlencoded"),
		"nil body":      func() *http.Request { r := formRequest(nil, ""); r.Body = nil; return r }(),
		"huge body":     form(url.Values{"username": {"alice"}, "pad": {strings.Repeat("x", 2048)}}),
		"not a form":    formRequest(strings.NewReader(`{"username":"alice"}`), "application/json"),
		"bad multipart": formRequest(strings.NewReader("--x\r\n"), "multipart/form-data; boundary=x"),
	} {
		if got := key(keyed, r); got != "<none>" {
			t.Errorf("%s: key = %q, want none", name, got)
		}
	}
}

func TestIPPrefixAndCompose(t *testing.T) {
	p := httplimit.IPPrefix(nil, 24, 56)
	def := httplimit.IPPrefix(nil, 0, 0)
	for _, tt := range []struct {
		k      httplimit.Keyer
		remote string
		want   string
	}{
		{p, "203.0.113.77:1", "203.0.113.0/24"},
		{p, "[2001:db8:1:2ff::9]:1", "2001:db8:1:200::/56"},
		{p, "[::ffff:203.0.113.77]:1", "203.0.113.0/24"},
		{def, "203.0.113.77:1", "203.0.113.77/32"},
		{def, "[2001:db8:1:2ff::9%eth0]:1", "2001:db8:1:2ff::/64"},
		{httplimit.Compose(httplimit.Header("X-A"), httplimit.Header("X-B")), "203.0.113.77:1", "1:a2:bc"},
		{httplimit.Compose(httplimit.Header("X-A"), httplimit.Header("X-C")), "203.0.113.77:1", "<none>"},
		{httplimit.Path(), "203.0.113.77:1", "/p"},
	} {
		r := request(tt.remote, "X-A", "a", "X-B", "bc")
		r.URL.Path = "/p"
		got, ok := tt.k.Key(r)
		if !ok {
			got = "<none>"
		}
		if got != tt.want {
			t.Errorf("Key(%s) = %q, want %q", tt.remote, got, tt.want)
		}
	}
	// Parts are length-prefixed: ("a:b", "c") and ("a", "b:c") differ.
	k := httplimit.Compose(httplimit.Header("X-A"), httplimit.Header("X-B"))
	k1, _ := k.Key(request("1.2.3.4:1", "X-A", "a:b", "X-B", "c"))
	k2, _ := k.Key(request("1.2.3.4:1", "X-A", "a", "X-B", "b:c"))
	if k1 == k2 {
		t.Errorf("Compose keys collide: %q", k1)
	}
}

func TestPattern(t *testing.T) {
	mux := http.NewServeMux()
	var got string
	mux.Handle("GET /items/{id}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = httplimit.Pattern().Key(r)
	}))
	serve(mux, httptest.NewRequest(http.MethodGet, "/items/42", nil))
	if got != "GET /items/{id}" {
		t.Errorf("Pattern key = %q, want %q", got, "GET /items/{id}")
	}
}

// FuzzFields checks that the fields written for any policy name the
// middleware accepts and any limit parse as structured-field lists, and
// that the problem details of a denial parse as JSON naming the policy.
func FuzzFields(f *testing.F) {
	f.Add("api", 10, int64(time.Minute), 3)
	f.Add("x y-z!", 1, int64(time.Millisecond), 2)
	f.Add("<a href='x'>&", 1, int64(time.Hour), 3)
	f.Fuzz(func(t *testing.T, name string, rate int, period int64, n int) {
		c := testclock.New(testclock.T0)
		l := fmt.Sprintf("%d/%dns", rate, period)
		if _, err := mustParse(l); err != nil {
			return
		}
		lim := limiter(t, newStore(t), c, "f", l)
		m, err := httplimit.New(httplimit.Config{Rules: []httplimit.Rule{{Name: name, Limiter: lim}}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return
		}
		if name == "" {
			name = "default" // the first rule's default name
		}
		srv := m.Handler(&recordingHandler{})
		for range min(max(n, 1), 5) {
			w := serve(srv, request("203.0.113.7:1"))
			policy, limit := rateLimitFields(t, w.Header())
			if len(policy) != 1 || len(limit) != 1 {
				t.Fatalf("fields %v %v, want one item each", policy, limit)
			}
			if w.Code != http.StatusTooManyRequests {
				continue
			}
			var p httplimit.Problem
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
				t.Fatalf("problem body %q: %v", w.Body, err)
			}
			if p.Status != 429 || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != name || w.Header().Get("Content-Length") != strconv.Itoa(w.Body.Len()) {
				t.Fatalf("problem %+v, Content-Length %s for a body of %d; want 429 violating %q", p, w.Header().Get("Content-Length"), w.Body.Len(), name)
			}
		}
	})
}

// FuzzKeys checks that every Keyer's AppendKey gives the bytes of its Key
// after any prefix, for any addresses, headers and usernames, and that
// composed keys of different parts differ.
func FuzzKeys(f *testing.F) {
	f.Add("203.0.113.7:1", "198.51.100.1, 10.0.0.2", "alice", "k")
	f.Add("[2001:db8::1%eth0]:443", "", "\xff\xfe", "")
	f.Add("10.0.0.1:1", "[::ffff:1.2.3.4]:80", strings.Repeat("u", 200), "1:x")
	trusted := &httplimit.ClientIP{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	user := httplimit.FormField("username", httplimit.FormFieldOptions{})
	keyers := map[string]httplimit.Keyer{
		"client":  trusted,
		"prefix":  httplimit.IPPrefix(trusted, 24, 56),
		"user":    user,
		"compose": httplimit.Compose(trusted, httplimit.Header("X-K"), user),
		"nested":  httplimit.Compose(httplimit.Compose(httplimit.Header("X-K")), httplimit.Path()),
	}
	f.Fuzz(func(t *testing.T, remote, xff, username, hdr string) {
		mk := func() *http.Request {
			r := formRequest(strings.NewReader(url.Values{"username": {username}}.Encode()), "application/x-www-form-urlencoded")
			r.RemoteAddr = remote
			r.Header.Set("X-Forwarded-For", xff)
			r.Header.Set("X-K", hdr)
			return r
		}
		for name, k := range keyers {
			want, wantOK := k.Key(mk())
			a, ok := k.(httplimit.KeyAppender)
			if !ok {
				t.Fatalf("%s: not a KeyAppender", name)
			}
			got, gotOK := a.AppendKey([]byte("prefix"), mk())
			if gotOK != wantOK || (wantOK && string(got) != "prefix"+want) {
				t.Fatalf("%s: AppendKey = %q, %v; Key = %q, %v", name, got, gotOK, want, wantOK)
			}
		}
		// Moving bytes between parts changes the composed key.
		c := httplimit.Compose(httplimit.Header("X-A"), httplimit.Header("X-B"))
		r1, r2 := mk(), mk()
		r1.Header.Set("X-A", hdr+"x")
		r1.Header.Set("X-B", username)
		r2.Header.Set("X-A", hdr)
		r2.Header.Set("X-B", "x"+username)
		k1, ok1 := c.Key(r1)
		k2, ok2 := c.Key(r2)
		if ok1 && ok2 && k1 == k2 {
			t.Fatalf("Compose: parts %q,%q and %q,%q share the key %q", hdr+"x", username, hdr, "x"+username, k1)
		}
	})
}
