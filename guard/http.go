package guard

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/logthrottle"
	"github.com/sluicehq/sluice/internal/ratelimitheader"
)

// MiddlewareConfig configures a Middleware. The zero value of each field
// means its default.
type MiddlewareConfig struct {
	// ClientIP finds client addresses. Default: the connection's address,
	// no trusted proxy.
	ClientIP *httplimit.ClientIP
	// Allow lets its addresses through unchecked, and marks their
	// requests exempt from every httplimit Middleware after this one.
	// Default none.
	Allow *List
	// Deny refuses its addresses with 403 Forbidden. Default none.
	Deny *List
	// Jails refuse the addresses and keys their registries have banned
	// (every address of a banned network), with 403 and Retry-After.
	// Default none.
	Jails []*Jail
	// Key, if set, derives a key from each request — an API key
	// (httplimit.Header), a hashed username (httplimit.FormField) — that
	// the Allow and Deny lists' keys and the jails' bans are checked
	// against, beside the address. Default nil: the client's address as
	// ClientIP keys it.
	Key httplimit.Keyer
	// Logger receives refusals (Info), at most a few lines a second per
	// message and jail however many requests are refused. Default
	// slog.Default().
	Logger *slog.Logger
}

// Middleware applies a Guard (see Guard for its order: allow list, deny
// list, bans) to the client's address and key before any limit: put it
// in front of httplimit's middleware. An allowed request is marked
// exempt from the limits after it; a denied or banned one is refused
// with 403 Forbidden (and Retry-After for a ban). A request without a
// client address is judged by its key alone, and one with neither
// passes on to the limits, which limit it under their shared key.
func Middleware(c MiddlewareConfig) func(http.Handler) http.Handler {
	if c.ClientIP == nil {
		c.ClientIP = &httplimit.ClientIP{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	log := slog.New(logthrottle.New(c.Logger.Handler(), logthrottle.Config{}))
	g := NewGuard(GuardConfig{Allow: c.Allow, Deny: c.Deny, Jails: c.Jails})
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var a Actor
			a.Addr, _ = c.ClientIP.Addr(r)
			if c.Key != nil {
				a.Key, _ = c.Key.Key(r)
			} else {
				a.Key, _ = c.ClientIP.Key(r)
			}
			v := g.Check(a)
			switch v.Action {
			case Exempt:
				next.ServeHTTP(w, httplimit.Exempt(r))
				return
			case Refuse:
				log.LogAttrs(r.Context(), slog.LevelInfo, "guard: denied by list", slog.String("ip", a.Addr.String()), slog.String("path", r.URL.Path))
			case Banned:
				log.LogAttrs(r.Context(), slog.LevelInfo, "guard: banned", slog.String("jail", v.Ban.Jail), slog.String("ban", v.Ban.Key), slog.String("ip", a.Addr.String()), slog.Duration("left", v.Left))
			default:
				next.ServeHTTP(w, r)
				return
			}
			WriteRefusal(w, v)
		})
	}
}

// WriteRefusal answers a request the guard refused (Refuse or Banned) as
// every surface of sluice does: 403 with RFC 9457 problem details, and,
// for a ban, Retry-After until it ends (see httplimit.WriteProblem).
func WriteRefusal(w http.ResponseWriter, v Verdict) {
	p := httplimit.Problem{Status: http.StatusForbidden, Detail: "Refused by the deny list."}
	if v.Action == Banned {
		p.Detail = fmt.Sprintf("Banned; retry after %d s.", max(ratelimitheader.CeilSeconds(v.Left), 1))
	}
	httplimit.WriteProblem(w, p, v.Left)
}
