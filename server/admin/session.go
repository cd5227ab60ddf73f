package admin

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The dashboard signs in with the token once, on the login page, and
// then holds a session cookie instead: HttpOnly (no script reads it),
// SameSite=Strict (no other site's request carries it), and not the
// token but a MAC of its expiry under the token, so that changing the
// token ends every session. Requests that carry such ambient credentials
// (the cookie, or Basic authentication, which a browser replays too) may
// change something only with the header CSRFHeader holding the value
// the dashboard page embeds, which another origin can neither read nor
// send without a preflight that is never granted.
const (
	// SessionCookie names the cookie of a dashboard session.
	SessionCookie = "sluice_admin"
	// CSRFHeader carries the dashboard's anti-forgery value on requests
	// that change something.
	CSRFHeader = "X-Sluice-CSRF"
	// SessionLength is how long a session lasts after signing in.
	SessionLength = 12 * time.Hour
)

// credential is how a request proved it holds the token.
type credential int

const (
	none    credential = iota
	bearer             // Authorization: Bearer: never sent by a browser on its own
	ambient            // Basic or the session cookie: replayed by browsers
)

// mac returns the MAC of msg under the token's digest, in base64.
func (h *handler) mac(msg string) string {
	m := hmac.New(sha256.New, h.digest[:])
	m.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// session returns a session cookie's value that lasts until exp.
func (h *handler) session(exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return e + "." + h.mac("session|"+e)
}

// validSession reports whether v is a session of the token, unexpired at
// now.
func (h *handler) validSession(v string, now time.Time) bool {
	e, sig, ok := strings.Cut(v, ".")
	exp, err := strconv.ParseInt(e, 10, 64)
	if !ok || err != nil || now.Unix() >= exp {
		return false
	}
	return hmac.Equal([]byte(sig), []byte(h.mac("session|"+e)))
}

// csrf returns the anti-forgery value of the credentials of r: bound to
// its session, or to Basic authentication.
func (h *handler) csrf(r *http.Request) string {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return h.mac("csrf|basic")
	}
	return h.mac("csrf|" + c.Value)
}

// credential tells how r proves it holds the token, comparing digests in
// constant time.
func (h *handler) credential(r *http.Request) credential {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return h.check(strings.TrimSpace(v), bearer)
	}
	if _, p, ok := r.BasicAuth(); ok {
		return h.check(p, ambient)
	}
	if c, err := r.Cookie(SessionCookie); err == nil && h.validSession(c.Value, time.Now()) {
		return ambient
	}
	return none
}

// check returns as if given is the token, else none.
func (h *handler) check(given string, as credential) credential {
	if given == "" {
		return none
	}
	d := sha256.Sum256([]byte(given))
	if subtle.ConstantTimeCompare(d[:], h.digest[:]) != 1 {
		return none
	}
	return as
}

// sameOrigin reports whether a browser sent r from a page of this server:
// Sec-Fetch-Site says so when the browser sends it, and an Origin must
// be this host's.
func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return o == ""
	}
	_, host, _ := strings.Cut(o, "://")
	return host == r.Host
}

// forged reports whether r, holding ambient credentials, may not change
// anything: it is not from this server's pages or lacks the CSRF value.
func (h *handler) forged(r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return false
	}
	v := r.Header.Get(CSRFHeader)
	return !sameOrigin(r) || v == "" || !hmac.Equal([]byte(v), []byte(h.csrf(r)))
}

// login signs a browser in: POST /admin/login with the form field token,
// from a page of this server. It sets the session cookie and sends the
// browser to the dashboard, or shows the form again.
func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if !sameOrigin(r) {
		h.loginPage(w, http.StatusForbidden, "Sign in from this server's own page.")
		return
	}
	if err := r.ParseForm(); err != nil || h.check(r.PostForm.Get("token"), ambient) == none {
		h.loginPage(w, http.StatusUnauthorized, "Wrong token.")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: h.session(time.Now().Add(SessionLength)), Path: "/admin/",
		MaxAge: int(SessionLength / time.Second), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, "/admin/", http.StatusSeeOther)
}

// logout ends the browser's session (its cookie; the token stays valid).
func (h *handler) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Path: "/admin/", MaxAge: -1, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}
