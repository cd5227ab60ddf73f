package httplimit_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
)

// A login form limited as the classic memcached limiters do: 10 failed attempts per 3 minutes
// per address and username, 100 per address, counting only failures and
// forgetting them after a success. The application sits behind a proxy on
// 10.0.0.0/8 that appends X-Forwarded-For.
func Example() {
	store := newExampleStore() // in an application: memory.New(memory.Config{}), or a Redis store
	client := &httplimit.ClientIP{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	username := httplimit.FormField("username", httplimit.FormFieldOptions{Secret: []byte("app secret")})
	// A fixed clock keeps the output stable; applications leave Clock nil.
	at := func() time.Time { return time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) }
	perUser, _ := sluice.New(store, sluice.Config{Action: "login-user", Limits: []sluice.Limit{{Rate: 10, Period: 3 * time.Minute}}, Clock: at})
	perIP, _ := sluice.New(store, sluice.Config{Action: "login-ip", Limits: []sluice.Limit{{Rate: 100, Period: 3 * time.Minute}}, Clock: at})
	failed := httplimit.Status(http.StatusUnauthorized)
	m, err := httplimit.New(httplimit.Config{
		ClientIP: client,
		Logger:   slog.New(slog.DiscardHandler),
		Rules: []httplimit.Rule{
			{Name: "ip-user", Limiter: perUser, Key: httplimit.Compose(client, username), Count: failed, Reset: httplimit.Successful},
			{Name: "ip", Limiter: perIP, Count: failed},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	login := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.PostFormValue("password") != "correct horse" {
			http.Error(w, "wrong username or password", http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, "welcome")
	}))

	try := func(password string) {
		body := url.Values{"username": {"alice"}, "password": {password}}.Encode()
		r := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("X-Forwarded-For", "198.51.100.7")
		r.RemoteAddr = "10.0.0.2:5555"
		w := httptest.NewRecorder()
		login.ServeHTTP(w, r)
		fmt.Printf("%d RateLimit: %s; Retry-After: %q\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	for range 11 {
		try("guess")
	}
	// Output:
	// 401 RateLimit: "ip-user";r=9;t=18, "ip";r=99;t=2; Retry-After: ""
	// 401 RateLimit: "ip-user";r=8;t=36, "ip";r=98;t=4; Retry-After: ""
	// 401 RateLimit: "ip-user";r=7;t=54, "ip";r=97;t=6; Retry-After: ""
	// 401 RateLimit: "ip-user";r=6;t=72, "ip";r=96;t=8; Retry-After: ""
	// 401 RateLimit: "ip-user";r=5;t=90, "ip";r=95;t=9; Retry-After: ""
	// 401 RateLimit: "ip-user";r=4;t=108, "ip";r=94;t=11; Retry-After: ""
	// 401 RateLimit: "ip-user";r=3;t=126, "ip";r=93;t=13; Retry-After: ""
	// 401 RateLimit: "ip-user";r=2;t=144, "ip";r=92;t=15; Retry-After: ""
	// 401 RateLimit: "ip-user";r=1;t=162, "ip";r=91;t=17; Retry-After: ""
	// 401 RateLimit: "ip-user";r=0;t=180, "ip";r=90;t=18; Retry-After: ""
	// 429 RateLimit: "ip-user";r=0;t=180; Retry-After: "18"
}
