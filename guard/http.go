package guard

import (
	"log/slog"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/httplimit"
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
	// Jails refuse the addresses they have banned with 403 and
	// Retry-After. Default none.
	Jails []*Jail
	// Key, if set, derives a key from each request — an API key
	// (httplimit.Header), a hashed username (httplimit.FormField) — that
	// the Allow and Deny lists' keys are checked against, after the
	// address: a denied key is refused with 403, an allowed one exempt
	// from every limit. Default nil: keys are not checked.
	Key httplimit.Keyer
	// Logger receives refusals (Info) and store failures (Warn). A store
	// failure lets the request through: the limits after the guard still
	// apply. Default slog.Default().
	Logger *slog.Logger
}

// Middleware checks the client's address, then its key (see
// MiddlewareConfig.Key), against allow and deny lists, and the address
// against jails, before any limit: put it in front of httplimit's
// middleware. The deny list wins over the allow list for the same kind of
// entry; an allowed address is not checked further. A request without a
// client address is checked by its key only, and passes on to the limits,
// which limit it under their shared key.
func Middleware(c MiddlewareConfig) func(http.Handler) http.Handler {
	if c.ClientIP == nil {
		c.ClientIP = &httplimit.ClientIP{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ip, ok := c.ClientIP.Addr(r)
			if !ok && c.Key == nil {
				next.ServeHTTP(w, r)
				return
			}
			if ok && c.Allow != nil && c.Allow.Contains(ip) {
				next.ServeHTTP(w, httplimit.Exempt(r))
				return
			}
			if ok && c.Deny != nil && c.Deny.Contains(ip) {
				c.Logger.LogAttrs(r.Context(), slog.LevelInfo, "guard: denied by list", slog.String("ip", ip.String()), slog.String("path", r.URL.Path))
				http.Error(w, http.StatusText(http.StatusForbidden), http.StatusForbidden)
				return
			}
			if c.Key != nil {
				if key, found := c.Key.Key(r); found {
					if c.Deny != nil && c.Deny.ContainsKey(key) {
						c.Logger.LogAttrs(r.Context(), slog.LevelInfo, "guard: key denied by list", slog.String("ip", ip.String()), slog.String("path", r.URL.Path))
						http.Error(w, http.StatusText(http.StatusForbidden), http.StatusForbidden)
						return
					}
					if c.Allow != nil && c.Allow.ContainsKey(key) {
						next.ServeHTTP(w, httplimit.Exempt(r))
						return
					}
				}
				if !ok {
					next.ServeHTTP(w, r)
					return
				}
			}
			key := ip.String()
			for _, j := range c.Jails {
				left, banned, err := j.Banned(r.Context(), key)
				if err != nil {
					c.Logger.LogAttrs(r.Context(), slog.LevelWarn, "guard: store failed; jail not checked", slog.String("jail", j.Name()), slog.Any("error", err))
					continue
				}
				if banned {
					c.Logger.LogAttrs(r.Context(), slog.LevelInfo, "guard: banned", slog.String("jail", j.Name()), slog.String("ip", key), slog.Duration("left", left))
					w.Header().Set("Retry-After", strconv.FormatInt(int64((left+999_999_999)/1e9), 10))
					http.Error(w, http.StatusText(http.StatusForbidden), http.StatusForbidden)
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}
