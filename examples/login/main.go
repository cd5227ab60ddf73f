// Command login is a small web application protected by sluice: a login
// form guarded against dictionary attacks, botnets and user enumeration,
// and an invite form whose spammers are shadow-banned. It is the example
// of docs/login.md; its tests drive it over real HTTP through the
// attacks.
//
//	go run ./examples/login            # on localhost:8090; see README.md
package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/store/memory"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "login:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("login", flag.ContinueOnError)
	addr := fs.String("addr", "localhost:8090", "listen address (8090: sluice serve's quick start has 8080)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	store := memory.New(memory.Config{})
	defer store.Close()
	a, err := newApp(store, appConfig{Logger: slog.Default()})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err // before saying it listens
	}
	srv := &http.Server{Handler: a.handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.WithoutCancel(ctx))
	}()
	slog.Info("listening", "url", "http://"+ln.Addr().String(), "demo", "alice / correct horse battery staple")
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// appConfig is what differs between production and the tests.
type appConfig struct {
	// TrustedProxies are the reverse proxies in front of the app.
	TrustedProxies []netip.Prefix
	// Delay is the login's progressive delay (guard.LoginConfig.Delay).
	Delay, MaxDelay time.Duration
	// Clock drives every limit; nil means the store's clock.
	Clock func() time.Time
	// AdminToken guards /admin/; empty disables it.
	AdminToken string
	Logger     *slog.Logger
}

type app struct {
	c       appConfig
	client  *httplimit.ClientIP
	login   *guard.Login
	jail    *guard.Jail
	allow   guard.List
	deny    guard.List
	limits  *httplimit.Middleware
	invites *httplimit.Middleware
	sent    atomic.Int64 // invitations really sent
	users   map[string][32]byte
	dummy   [32]byte // compared against for unknown users, to take the same time
}

func newApp(store sluice.Store, c appConfig) (*app, error) {
	a := &app{c: c, client: &httplimit.ClientIP{TrustedProxies: c.TrustedProxies}}
	// Demo accounts; a real application stores bcrypt or argon2 hashes.
	a.users = map[string][32]byte{"alice": hashPassword("alice", "correct horse battery staple")}
	a.dummy = hashPassword("", "no such user")
	var err error
	a.jail, err = guard.NewJail(store, guard.JailConfig{
		Name: "login", MaxFailures: 30, FindTime: 10 * time.Minute, BanTime: 15 * time.Minute, Clock: c.Clock,
		OnBan: func(b guard.Ban) {
			c.Logger.Warn("ban", "key", b.Key, "until", b.Until, "offences", b.Offences, "reason", b.Reason)
		},
	})
	if err != nil {
		return nil, err
	}
	// The login checks the same lists as the guard in front of every
	// page: addresses, and usernames (a frozen account: "key:alice").
	a.login, err = guard.NewLogin(store, guard.LoginConfig{
		Jail: a.jail, Allow: &a.allow, Deny: &a.deny, Delay: c.Delay, MaxDelay: c.MaxDelay, Clock: c.Clock,
		OnAttack: func(at guard.Attack) { c.Logger.Warn("attack", "scope", at.Scope, "from", at.From) },
	})
	if err != nil {
		return nil, err
	}
	lim := func(action string, l sluice.Limit) *sluice.Limiter {
		if err != nil {
			return nil
		}
		var x *sluice.Limiter
		x, err = sluice.New(store, sluice.Config{Action: action, Limits: []sluice.Limit{l}, Clock: c.Clock})
		return x
	}
	perIP := lim("requests", sluice.PerMinute(600))
	invite := lim("invite", sluice.PerHour(5))
	if err != nil {
		return nil, err
	}
	// Every request: 600 a minute per address, enforced.
	a.limits, err = httplimit.New(httplimit.Config{ClientIP: a.client, Logger: c.Logger, Rules: []httplimit.Rule{{Name: "requests", Limiter: perIP}}})
	if err != nil {
		return nil, err
	}
	// Invitations: 5 an hour per address, shadow-banned beyond.
	a.invites, err = httplimit.New(httplimit.Config{ClientIP: a.client, Logger: c.Logger, Rules: []httplimit.Rule{{
		Name: "invite", Limiter: invite, Mode: httplimit.Shadow, Match: httplimit.Methods(http.MethodPost),
	}}})
	return a, err
}

func hashPassword(user, password string) [32]byte {
	return sha256.Sum256([]byte("demo-salt:" + user + ":" + password))
}

func (a *app) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /login", a.serveLogin)
	mux.Handle("POST /invite", a.invites.Handler(http.HandlerFunc(a.serveInvite)))
	mux.HandleFunc("GET /admin/bans", a.serveBans)
	mux.HandleFunc("POST /admin/lists/{list}", a.serveListEdit)
	mux.HandleFunc("DELETE /admin/lists/{list}", a.serveListEdit)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<form method=post action=/login><input name=username><input name=password type=password><button>Log in</button></form>`)
	})
	g := guard.Middleware(guard.MiddlewareConfig{ClientIP: a.client, Allow: &a.allow, Deny: &a.deny, Jails: []*guard.Jail{a.jail}, Logger: a.c.Logger})
	return g(a.limits.Handler(mux))
}

// serveLogin answers 200 on success, and the same 401 for a wrong
// password and an unknown user; 429 when the attempt is not allowed, with
// "captcha" in the body when a CAPTCHA would let it through.
func (a *app) serveLogin(w http.ResponseWriter, r *http.Request) {
	ip, ok := a.client.Addr(r)
	if !ok {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	user, password := r.PostFormValue("username"), r.PostFormValue("password")
	at, err := a.login.Begin(r.Context(), guard.Try{IP: ip, Username: user, CaptchaSolved: r.PostFormValue("captcha") == "solved"})
	if err != nil {
		// The store failed: fail closed for logins, and say so in the log.
		a.c.Logger.Error("login: store failed", "error", err)
		http.Error(w, "try again later", http.StatusServiceUnavailable)
		return
	}
	if !at.Allowed && at.Listed {
		// A frozen account or a name no one logs in as: the same answer,
		// after the same work, as a wrong password. No log line per
		// refusal: an attack would write one per request (the jail's
		// bans and the login's attack notices are logged).
		got := hashPassword(user, password)
		subtle.ConstantTimeCompare(got[:], a.dummy[:])
		http.Error(w, "wrong username or password", http.StatusUnauthorized)
		return
	}
	if !at.Allowed {
		refuse(w, at)
		return
	}
	if err := at.Wait(r.Context()); err != nil {
		return
	}
	want, known := a.users[user]
	if !known {
		want = a.dummy
	}
	got := hashPassword(user, password)
	if subtle.ConstantTimeCompare(got[:], want[:]) == 1 && known {
		_ = at.Succeed(r.Context())
		fmt.Fprintln(w, "welcome")
		return
	}
	_, _, _ = at.Fail(r.Context())
	http.Error(w, "wrong username or password", http.StatusUnauthorized)
}

// refuse answers a login attempt the login's limits did not allow: 429
// with problem details as httplimit writes them, naming the login's
// policy, and "captcha" in the detail when a solved CAPTCHA would let it
// through. The fields of the per-address rule come off: that rule did
// not deny it, and its "r=599" would tell the client the opposite.
func refuse(w http.ResponseWriter, at *guard.Attempt) {
	h := w.Header()
	h.Del("RateLimit")
	h.Del("RateLimit-Policy")
	secs := max(int64((at.RetryAfter+time.Second-1)/time.Second), 1)
	detail := fmt.Sprintf("Too many login attempts; retry after %d s.", secs)
	if at.Captcha {
		detail += " Or solve the captcha."
	}
	h.Set("Retry-After", strconv.FormatInt(secs, 10))
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusTooManyRequests)
	_ = json.NewEncoder(w).Encode(httplimit.Problem{
		Type: httplimit.ProblemType, Title: "Too Many Requests", Status: http.StatusTooManyRequests,
		Detail: detail, ViolatedPolicies: []string{"login"},
	})
}

// serveInvite always says the invitation was sent; a shadow-banned
// spammer's invitations are not.
func (a *app) serveInvite(w http.ResponseWriter, r *http.Request) {
	if !httplimit.Shadowed(r) {
		a.sent.Add(1) // a real application sends the e-mail here
	}
	fmt.Fprintln(w, "invitation sent")
}

// serveListEdit adds (POST) or removes (DELETE) the entry given by
// ?entry= to or from the allow or deny list: an address, a network, or
// "key:" and a username in lower case. Edits take effect at once, for the guard and the login.
func (a *app) serveListEdit(w http.ResponseWriter, r *http.Request) {
	if !a.admin(r) {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	l := map[string]*guard.List{"allow": &a.allow, "deny": &a.deny}[r.PathValue("list")]
	if l == nil {
		http.NotFound(w, r)
		return
	}
	e, err := guard.ParseEntry(r.URL.Query().Get("entry"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.Method == http.MethodDelete {
		l.Remove(e)
	} else {
		l.Add(e)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *app) admin(r *http.Request) bool {
	tok := r.Header.Get("Authorization")
	return a.c.AdminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte("Bearer "+a.c.AdminToken)) == 1
}

// serveBans lists the bans as JSON, or in a firewall format given by
// ?format= (nftables, ipset, pf, nginx-geo…).
func (a *app) serveBans(w http.ResponseWriter, r *http.Request) {
	if !a.admin(r) {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	bans, err := a.jail.Bans(r.Context())
	if err != nil {
		http.Error(w, "store failed", http.StatusServiceUnavailable)
		return
	}
	if f := r.URL.Query().Get("format"); f != "" {
		o := guard.ExportOptions{}
		if a.c.Clock != nil {
			o.Now = a.c.Clock()
		}
		if err := guard.Export(w, guard.Format(f), bans, o); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(bans)
}
