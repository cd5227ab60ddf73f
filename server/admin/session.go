package admin

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
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

// An access is what a request's credentials let it do: how it proved it
// holds a token, which one, and whether it tried one that is wrong.
type access struct {
	cred     credential
	readOnly bool // the read-only token: it views, it changes nothing
	wrong    bool // a token was given and is neither
}

// mac returns the MAC of msg under the token's digest, in base64.
func (h *handler) mac(msg string) string {
	m := hmac.New(sha256.New, h.digest[:])
	m.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Roles of a session, in its cookie.
const (
	roleAdmin    = "rw"
	roleReadOnly = "ro"
)

// session returns a session cookie's value of role that lasts until exp.
func (h *handler) session(exp time.Time, role string) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return e + "." + role + "." + h.mac("session|"+role+"|"+e)
}

// validSession reports whether v is a session of the token, unexpired at
// now, and whether it is read-only.
func (h *handler) validSession(v string, now time.Time) (ok, readOnly bool) {
	e, rest, ok1 := strings.Cut(v, ".")
	role, sig, ok2 := strings.Cut(rest, ".")
	exp, err := strconv.ParseInt(e, 10, 64)
	if !ok1 || !ok2 || err != nil || now.Unix() >= exp || (role != roleAdmin && role != roleReadOnly) {
		return false, false
	}
	return hmac.Equal([]byte(sig), []byte(h.mac("session|"+role+"|"+e))), role == roleReadOnly
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

// access tells how r proves it holds a token, comparing digests in
// constant time.
func (h *handler) access(r *http.Request) access {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return h.check(strings.TrimSpace(v), bearer)
	}
	if _, p, ok := r.BasicAuth(); ok {
		return h.check(p, ambient)
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		if ok, ro := h.validSession(c.Value, h.now()); ok {
			return access{cred: ambient, readOnly: ro}
		}
	}
	return access{}
}

// check returns the access of the token given, presented as as.
func (h *handler) check(given string, as credential) access {
	if given == "" {
		return access{}
	}
	d := sha256.Sum256([]byte(given))
	switch {
	case subtle.ConstantTimeCompare(d[:], h.digest[:]) == 1:
		return access{cred: as}
	case h.readOnly != nil && subtle.ConstantTimeCompare(d[:], h.readOnly[:]) == 1:
		return access{cred: as, readOnly: true}
	}
	return access{wrong: true}
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
	if secs, ok := h.retryAfter(r); ok {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		h.loginPage(w, http.StatusTooManyRequests, fmt.Sprintf("Too many wrong tokens: try again in %d s.", secs))
		return
	}
	var a access
	if err := r.ParseForm(); err == nil {
		a = h.check(r.PostForm.Get("token"), ambient)
	}
	if a.cred == none {
		h.failed(r)
		h.loginPage(w, http.StatusUnauthorized, "Wrong token.")
		return
	}
	role := roleAdmin
	if a.readOnly {
		role = roleReadOnly
	}
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: h.session(h.now().Add(SessionLength), role), Path: "/admin/",
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
