// Package admin is the admin API of sluice serve and its dashboard: list,
// add and lift bans, edit the allow and deny lists, list the rules, peek
// at a key, see the latest denials, and follow each rule's rates and most
// limited keys live (a Snapshot a second, through a Feed), behind a token.
//
// # Authentication
//
// Every request must carry the token: as "Authorization: Bearer TOKEN";
// as the password of HTTP Basic authentication (any user name); or, for
// the dashboard, as the session cookie that signing in on /admin/login
// with the token sets (see SessionCookie). Tokens are compared in
// constant time (of their SHA-256 digests, so not even the length
// leaks). A request without the token, or with a wrong one, gets 401
// with a body that says only that, whatever it asked for; a browser
// opening /admin/ is sent to the login page.
//
// A browser replays Basic credentials and cookies on requests other sites
// make it send, so with those a request may change something (any method
// but GET and HEAD) only from this server's own pages, with the header
// CSRFHeader holding the value the dashboard embeds: else 403. Bearer
// requests need neither.
//
// # Endpoints
//
//	GET    /admin/                         the dashboard (HTML and a script that calls this API)
//	GET    /admin/login                    the dashboard's login page (no token needed)
//	POST   /admin/login                    form field token: sets the session cookie
//	POST   /admin/logout                   ends the session of the cookie
//	GET    /admin/static/...               the dashboard's script, styles and chart library (no token needed)
//	GET    /admin/api/events               a Snapshot a second (its latest sample), as server-sent events
//	GET    /admin/api/live                 the Snapshot of the moment, with the last minutes' rates
//	GET    /admin/api/rules                the rules and their failure policies
//	POST   /admin/api/peek                 {"rule":"login","key":"203.0.113.7"}
//	GET    /admin/api/bans                 the bans in force, all of them
//	GET    /admin/api/bans/page?sort=S&jail=J&filter=F&offset=N&limit=L
//	                                       a page of them (a BanPage): sorted newest (the
//	                                       default), refused, offences or key (in address
//	                                       order); of jail J; those of networks that overlap F,
//	                                       or whose key holds F; at most L (50, ≤500) from N
//	GET    /admin/api/bans/groups?jail=J&filter=F&offset=N&limit=L
//	                                       the bans grouped by /24 and /64, the largest first
//	POST   /admin/api/bans                 {"jail":"manual","key":"203.0.113.7","duration":"1h","reason":"..."}
//	DELETE /admin/api/bans?jail=J&key=K    lift a ban (204; 404 if J has none of K)
//	DELETE /admin/api/bans?key=K           lift K's bans in every jail (200, a Lifted; 404 if none)
//	DELETE /admin/api/bans?within=NET[&jail=J]
//	                                       lift the bans within NET, a group (200, a Lifted; 404 if none)
//	GET    /admin/api/jails                the jails, their settings and counts (JailView)
//	GET    /admin/api/lists/{allow|deny}   the entries of a list
//	POST   /admin/api/lists/{allow|deny}   {"entry":"10.0.0.0/8"} (or "key:NAME")
//	DELETE /admin/api/lists/{allow|deny}?entry=E
//	GET    /admin/api/denials              the latest denials, newest first
//	GET    /admin/api/audit?after=N&since=T&limit=L
//	                                       the audit trail of bans, lifts and expiries,
//	                                       oldest first: entries numbered above N (0),
//	                                       at T (RFC 3339) or later, at most L (100, ≤1000)
//
// A ban's key is written as in the lists: an address, a network, or
// "key:NAME" (a bare name is a key too). Bodies are JSON; errors are
// {"error":"..."} with 400 (bad input), 404 (no such jail, list or ban) or
// 503 (the store failed).
package admin

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	rp "runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/notify"
	"github.com/sluicehq/sluice/internal/jsonhttp"
	"github.com/sluicehq/sluice/wire"
)

// ErrNotFound is what a Backend returns for a jail or list that does not
// exist.
var ErrNotFound = errors.New("not found")

// A Backend is what the admin API manages: the running service.
type Backend interface {
	// Rules lists the rules in force.
	Rules() []RuleView
	// Peek reports what a take of one unit by key under rule would get,
	// taking nothing.
	Peek(ctx context.Context, rule, key string) (Decision, error)
	// Bans lists the bans in force.
	Bans(ctx context.Context) ([]wire.Ban, error)
	// Ban bans the network or key e in jail for d (zero: the jail's own
	// length).
	Ban(ctx context.Context, jail string, e guard.Entry, d time.Duration, reason string) (wire.Ban, error)
	// Lift ends the ban of e in jail.
	Lift(ctx context.Context, jail string, e guard.Entry) error
	// LiftEvery ends the bans of e in every jail that holds one, and
	// returns them; ErrNotFound when none does.
	LiftEvery(ctx context.Context, e guard.Entry) ([]wire.Ban, error)
	// Jails lists the jails, the manual one first, with their counts.
	Jails(ctx context.Context) ([]JailView, error)
	// List returns the entries of the list named "allow" or "deny".
	List(name string) ([]guard.Entry, error)
	// Add adds entry e to the list named "allow" or "deny".
	Add(name string, e guard.Entry) error
	// Remove removes entry e from the list named "allow" or "deny".
	Remove(name string, e guard.Entry) error
	// Denials lists the latest denials, newest first.
	Denials() []Denial
	// Feed returns the feed of the dashboard's snapshots; nil: none, and
	// the events endpoint answers 404.
	Feed() *Feed
	// Live returns the snapshot of the moment with the rates of the last
	// minutes, what a dashboard draws as it opens; nil: none (404).
	Live(ctx context.Context) *Snapshot
}

// An Auditor is a Backend that keeps an audit trail of bans (package
// guard/notify); the admin API serves it at /admin/api/audit.
type Auditor interface {
	// Audit returns the entries numbered above after, of since or later,
	// oldest first, at most limit.
	Audit(after uint64, since time.Time, limit int) notify.Page
}

// A RuleView is a rule as the admin API lists it: its limits, failure
// policy and jails.
type RuleView struct {
	Name   string   `json:"name"`
	Limits []string `json:"limits"`
	// Mode is "enforce", or "shadow": the rule decides and counts but
	// never denies (a dry run).
	Mode    string   `json:"mode"`
	Failure string   `json:"failure"`
	Jails   []string `json:"jails,omitempty"`
}

// A JailView is a jail as the admin API lists it: its settings, and
// what it did since the service started.
type JailView struct {
	Name  string   `json:"name"`
	Rules []string `json:"rules,omitempty"`
	// MaxFailures failures within FindTime ban for BanTime, growing by
	// Growth per offence up to MaxBanTime, each lengthened by up to
	// Jitter of it; all zero for the manual jail.
	MaxFailures int     `json:"max_failures,omitempty"`
	FindTime    string  `json:"find_time,omitempty"`
	BanTime     string  `json:"ban_time,omitempty"`
	MaxBanTime  string  `json:"max_ban_time,omitempty"`
	Growth      float64 `json:"growth,omitempty"`
	Jitter      float64 `json:"jitter,omitempty"`
	// Bans are the bans it holds now, Refused the requests they refused;
	// BansMade the bans it made since the service started.
	Bans     int    `json:"bans"`
	Refused  int64  `json:"refused"`
	BansMade uint64 `json:"bans_made"`
	// StrikesLost counts the failures it could not count, by reason
	// (see JailLive).
	StrikesLost map[string]uint64 `json:"strikes_lost,omitempty"`
}

// A Lifted is the answer to a lift of several bans.
type Lifted struct {
	Lifted []wire.Ban `json:"lifted"`
}

// A Decision is the answer to a peek.
type Decision struct {
	Allowed    bool    `json:"allowed"`
	Rule       string  `json:"rule"`
	Policy     string  `json:"policy"`
	Remaining  int     `json:"remaining"`
	ResetAfter float64 `json:"reset_after"`
	RetryAfter float64 `json:"retry_after"`
}

// A Denial is a request a rule denied.
type Denial struct {
	Time       time.Time `json:"time"`
	Rule       string    `json:"rule"`
	Key        string    `json:"key"`
	RetryAfter float64   `json:"retry_after"`
}

// maxBody bounds the admin requests' bodies.
const maxBody = 16 << 10

// Handler returns the admin API over b, accepting only requests that
// carry token. An empty token is an error: an open admin API is never
// what is meant.
func Handler(b Backend, c Config) (http.Handler, error) {
	h, err := newHandler(b, c)
	if err != nil {
		return nil, err
	}
	mux := h.routes()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		if h.admit(w, r) {
			mux.ServeHTTP(w, r)
		}
	}), nil
}

// newHandler checks c and returns the handler of b it configures.
func newHandler(b Backend, c Config) (*handler, error) {
	if c.Token == "" {
		return nil, fmt.Errorf("admin: %w: empty token", sluice.ErrInvalidRequest)
	}
	if c.ReadOnlyToken == c.Token {
		return nil, fmt.Errorf("admin: %w: the read-only token is the token", sluice.ErrInvalidRequest)
	}
	h := &handler{b: b, digest: sha256.Sum256([]byte(c.Token)), clock: c.Clock}
	if h.clock == nil {
		h.clock = time.Now
	}
	if c.ReadOnlyToken != "" {
		d := sha256.Sum256([]byte(c.ReadOnlyToken))
		h.readOnly = &d
	}
	var err error
	if h.throttle, err = newThrottle(h.clock); err != nil {
		return nil, err
	}
	return h, nil
}

// routes returns the admin API's routes, which Handler admits requests to.
func (h *handler) routes() *http.ServeMux {
	b := h.b
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/{$}", h.dashboard)
	mux.HandleFunc("POST /admin/logout", h.logout)
	mux.HandleFunc("GET /admin/api/events", h.events)
	mux.HandleFunc("GET /admin/api/live", h.live)
	mux.HandleFunc("GET /admin/api/rules", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, b.Rules()) })
	mux.HandleFunc("POST /admin/api/peek", h.peek)
	mux.HandleFunc("GET /admin/api/bans", h.bans)
	mux.HandleFunc("GET /admin/api/bans/page", h.banPage)
	mux.HandleFunc("GET /admin/api/bans/groups", h.banGroups)
	mux.HandleFunc("POST /admin/api/bans", h.ban)
	mux.HandleFunc("DELETE /admin/api/bans", h.lift)
	mux.HandleFunc("GET /admin/api/jails", h.jails)
	mux.HandleFunc("GET /admin/api/lists/{list}", h.list)
	mux.HandleFunc("POST /admin/api/lists/{list}", h.edit)
	mux.HandleFunc("DELETE /admin/api/lists/{list}", h.edit)
	mux.HandleFunc("GET /admin/api/denials", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, b.Denials()) })
	if a, ok := b.(Auditor); ok {
		mux.HandleFunc("GET /admin/api/audit", func(w http.ResponseWriter, r *http.Request) { audit(w, r, a) })
	}
	// The Go runtime's profiles, for whoever holds the token: CPU and
	// execution trace (?seconds=N, under the listener's write timeout),
	// and the named ones (heap, allocs, goroutine, mutex, block,
	// threadcreate).
	mux.HandleFunc("GET /admin/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /admin/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /admin/debug/pprof/{profile}", func(w http.ResponseWriter, r *http.Request) {
		if rp.Lookup(r.PathValue("profile")) == nil {
			writeError(w, http.StatusNotFound, "no profile "+r.PathValue("profile"))
			return
		}
		pprof.Handler(r.PathValue("profile")).ServeHTTP(w, r)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no admin endpoint "+r.Method+" "+r.URL.Path)
	})
	return mux
}

// Config configures the admin API's handler.
type Config struct {
	// Token is the token that views and acts. Required.
	Token string
	// ReadOnlyToken, when set, is a token that views everything and
	// changes nothing (a wallboard's). Default "": none.
	ReadOnlyToken string
	// Clock is the time of sessions and of the sign-in throttle. Default
	// nil: time.Now.
	Clock func() time.Time
}

type handler struct {
	b        Backend
	digest   [sha256.Size]byte
	readOnly *[sha256.Size]byte // nil: no read-only token
	clock    func() time.Time
	throttle *sluice.Limiter // wrong tokens by client address
}

func (h *handler) now() time.Time { return h.clock() }

// challenge asks for credentials, one challenge a header, Basic first:
// Chromium answered the two joined in one header with no credentials,
// and answers Basic with those of a URL (a wallboard's
// http://admin:TOKEN@…). A page's script (Sec-Fetch-Mode cors, no-cors
// or same-origin) is asked for Bearer alone: Basic would make the browser
// prompt over the dashboard whose session ended.
func challenge(w http.ResponseWriter, r *http.Request) {
	if m := r.Header.Get("Sec-Fetch-Mode"); m == "" || m == "navigate" {
		w.Header().Add("WWW-Authenticate", `Basic realm="sluice admin"`)
	}
	w.Header().Add("WWW-Authenticate", `Bearer realm="sluice admin"`)
}

// navigation reports whether r is a browser opening a page (which a
// sign-in page answers best) rather than a script or a fetch (which a
// 401 challenge does). A browser says so in Sec-Fetch-Mode; an older
// one that does not asks for HTML first. A wallboard that opens
// http://admin:TOKEN@host/admin/?auth=basic asks for the challenge that
// makes it send its credentials.
func navigation(r *http.Request) bool {
	if r.URL.Query().Get("auth") == "basic" {
		return false
	}
	if m := r.Header.Get("Sec-Fetch-Mode"); m != "" {
		return m == "navigate"
	}
	return strings.HasPrefix(r.Header.Get("Accept"), "text/html")
}

// admit answers the requests that need no token (the login page) and
// those refused (no token, or a forged change), and reports whether r
// goes on to the endpoints.
func (h *handler) admit(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path == "/admin/login" {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			h.loginPage(w, http.StatusOK, "")
		case http.MethodPost:
			h.login(w, r)
		default:
			writeError(w, http.StatusMethodNotAllowed, r.Method+" not allowed on /admin/login")
		}
		return false
	}
	if strings.HasPrefix(r.URL.Path, "/admin/static/") && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		staticHandler.ServeHTTP(w, r) // public code and styles, which the login page needs too
		return false
	}
	if h.throttled(w, r) {
		return false
	}
	a := h.access(r)
	if a.wrong {
		h.failed(r)
	}
	switch {
	case a.cred == none && r.Method == http.MethodGet && r.URL.Path == "/admin/" && navigation(r):
		http.Redirect(w, r, "/admin/login", http.StatusSeeOther)
		return false
	case a.cred == none:
		challenge(w, r)
		writeError(w, http.StatusUnauthorized, "unauthorized")
		return false
	case a.readOnly && r.Method != http.MethodGet && r.Method != http.MethodHead && r.URL.Path != "/admin/logout":
		writeError(w, http.StatusForbidden, "signed in with the read-only token: it views, it changes nothing")
		return false
	case a.cred == ambient && h.forged(r):
		writeError(w, http.StatusForbidden, "a change made with a browser's credentials must come from the dashboard, with its "+CSRFHeader+" header")
		return false
	}
	return true
}

// events streams the dashboard's snapshots.
func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	f := h.b.Feed()
	if f == nil {
		writeError(w, http.StatusNotFound, "no live feed")
		return
	}
	f.ServeHTTP(w, r)
}

// live answers the snapshot of the moment with the last minutes' rates.
func (h *handler) live(w http.ResponseWriter, r *http.Request) {
	s := h.b.Live(r.Context())
	if s == nil {
		writeError(w, http.StatusNotFound, "no live feed")
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (h *handler) peek(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Rule string `json:"rule"`
		Key  string `json:"key"`
	}
	if !decode(w, r, &req) {
		return
	}
	if req.Rule == "" || req.Key == "" {
		writeError(w, http.StatusBadRequest, "rule and key are required")
		return
	}
	d, err := h.b.Peek(r.Context(), req.Rule, req.Key)
	if err != nil {
		writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (h *handler) bans(w http.ResponseWriter, r *http.Request) {
	bans, err := h.b.Bans(r.Context())
	if err != nil {
		writeFailure(w, err)
		return
	}
	if bans == nil {
		bans = []wire.Ban{}
	}
	writeJSON(w, http.StatusOK, bans)
}

func (h *handler) ban(w http.ResponseWriter, r *http.Request) {
	var req wire.BanRequest
	if !decode(w, r, &req) {
		return
	}
	var d time.Duration
	if req.Duration != "" {
		var err error
		if d, err = time.ParseDuration(req.Duration); err != nil || d <= 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("duration %q must be a positive Go duration such as 90m", req.Duration))
			return
		}
	}
	if req.Jail == "" || req.Key == "" {
		writeError(w, http.StatusBadRequest, "jail and key are required")
		return
	}
	b, err := h.b.Ban(r.Context(), req.Jail, banEntry(req.Key), d, req.Reason)
	if err != nil {
		writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, b)
}

// lift ends a ban (jail and key), a key's bans in every jail (key), or
// the bans within a network (within, and jail to keep to one).
func (h *handler) lift(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	jail, key, within := q.Get("jail"), q.Get("key"), q.Get("within")
	switch {
	case within != "" && key == "":
		h.liftWithin(w, r, jail, within)
	case key == "" || within != "":
		writeError(w, http.StatusBadRequest, "name a ban with jail and key, a key's bans in every jail with key, or the bans within a network with within")
	case jail == "":
		lifted, err := h.b.LiftEvery(r.Context(), banEntry(key))
		if err != nil {
			writeFailure(w, err)
			return
		}
		writeJSON(w, http.StatusOK, Lifted{lifted})
	default:
		if err := h.b.Lift(r.Context(), jail, banEntry(key)); err != nil {
			writeFailure(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// liftWithin ends the bans of jail (every jail when "") within the
// network within: a group of the dashboard.
func (h *handler) liftWithin(w http.ResponseWriter, r *http.Request, jail, within string) {
	net, err := guard.ParsePrefix(within)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("within %q is not an address or a network", within))
		return
	}
	bans, err := h.b.Bans(r.Context())
	if err != nil {
		writeFailure(w, err)
		return
	}
	out := Lifted{Lifted: []wire.Ban{}}
	for _, b := range Within(bans, jail, net) {
		switch err := h.b.Lift(r.Context(), b.Jail, banEntry(b.Key)); {
		case errors.Is(err, ErrNotFound): // lifted meanwhile, or lapsed
		case err != nil:
			writeFailure(w, err)
			return
		default:
			out.Lifted = append(out.Lifted, b)
		}
	}
	if len(out.Lifted) == 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no bans within %s", net))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// banPage answers a page of the bans in force.
func (h *handler) banPage(w http.ResponseWriter, r *http.Request) {
	if bans, q, ok := h.query(w, r); ok {
		writeJSON(w, http.StatusOK, Page(bans, q))
	}
}

// banGroups answers a page of the groups of the bans in force.
func (h *handler) banGroups(w http.ResponseWriter, r *http.Request) {
	if bans, q, ok := h.query(w, r); ok {
		writeJSON(w, http.StatusOK, Groups(bans, q))
	}
}

// query reads the BanQuery of r and lists the bans in force; on failure
// it writes the error and reports false.
func (h *handler) query(w http.ResponseWriter, r *http.Request) ([]wire.Ban, BanQuery, bool) {
	q, err := parseBanQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return nil, q, false
	}
	list := h.b.Bans
	if b, ok := h.b.(BansInAnyOrder); ok {
		list = b.BansInAnyOrder
	}
	bans, err := list(r.Context())
	if err != nil {
		writeFailure(w, err)
		return nil, q, false
	}
	return bans, q, true
}

// BansInAnyOrder is a Backend that lists the bans in force faster in no
// order: the pages of bans, which sort them their own way, ask it.
type BansInAnyOrder interface {
	BansInAnyOrder(ctx context.Context) ([]wire.Ban, error)
}

func (h *handler) jails(w http.ResponseWriter, r *http.Request) {
	jails, err := h.b.Jails(r.Context())
	if err != nil {
		writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusOK, jails)
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	entries, err := h.b.List(r.PathValue("list"))
	if err != nil {
		writeFailure(w, err)
		return
	}
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.String()
	}
	writeJSON(w, http.StatusOK, map[string][]string{"entries": out})
}

func (h *handler) edit(w http.ResponseWriter, r *http.Request) {
	entry := r.URL.Query().Get("entry")
	if r.Method == http.MethodPost {
		var req struct {
			Entry string `json:"entry"`
		}
		if !decode(w, r, &req) {
			return
		}
		entry = req.Entry
	}
	if entry == "" {
		writeError(w, http.StatusBadRequest, "entry is required")
		return
	}
	e, err := guard.ParseEntry(entry)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	edit := h.b.Add
	if r.Method == http.MethodDelete {
		edit = h.b.Remove
	}
	if err := edit(r.PathValue("list"), e); err != nil {
		writeFailure(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// banEntry reads the key of a ban as the admin API takes it: as the
// lists write their entries (guard.ParseEntry), where a bare name is a
// key too.
func banEntry(key string) guard.Entry {
	if e, err := guard.ParseEntry(key); err == nil {
		return e
	}
	return guard.KeyEntry(key)
}

// decode reads one JSON object of at most maxBody bytes into v, refusing
// unknown fields; on failure it writes the error and returns false.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if status, err := jsonhttp.Decode(w, r, maxBody, v); err != nil {
		writeError(w, status, err.Error())
		return false
	}
	return true
}

// writeFailure answers a Backend's error: 404 for what does not exist,
// 400 for invalid input, 503 for a store failure.
func writeFailure(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, sluice.ErrStore):
		writeError(w, http.StatusServiceUnavailable, "the store failed; try again")
	default:
		writeError(w, http.StatusBadRequest, err.Error())
	}
}

func writeError(w http.ResponseWriter, status int, msg string) { jsonhttp.Error(w, status, msg) }

func writeJSON(w http.ResponseWriter, status int, v any) { jsonhttp.Write(w, status, v) }

// defaultAuditPage is how many audit entries a request gets when it
// names no limit.
const defaultAuditPage = 100

// audit answers GET /admin/api/audit from a.
func audit(w http.ResponseWriter, r *http.Request, a Auditor) {
	q := r.URL.Query()
	var after uint64
	var since time.Time
	limit := defaultAuditPage
	var err error
	if v := q.Get("after"); v != "" {
		if after, err = strconv.ParseUint(v, 10, 64); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("after %q must be an entry's seq, a whole number", v))
			return
		}
	}
	if v := q.Get("since"); v != "" {
		if since, err = time.Parse(time.RFC3339, v); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("since %q must be an RFC 3339 time such as 2026-01-02T15:04:05Z", v))
			return
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > notify.MaxPage {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q must be 1 to %d", v, notify.MaxPage))
			return
		}
	}
	writeJSON(w, http.StatusOK, a.Audit(after, since, limit))
}
