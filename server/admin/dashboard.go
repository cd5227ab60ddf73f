package admin

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/uplot"
)

// The dashboard is a page of this package's templates and a script that
// draws it from the admin API: the rules (GET /admin/api/rules), the
// lists, the moment (GET /admin/api/live), then, pushed once a second,
// a Snapshot of the decisions by cause and the top refused keys (GET
// /admin/api/events), and the bans a page at a time (GET
// /admin/api/bans/page and /groups). Every action it
// offers calls the admin API's endpoints, as the CLI does, with the
// session cookie and the CSRF header. Its chart library (uPlot) is
// vendored into internal/uplot at the version web/package-lock.json pins
// (scripts/vendor-dashboard.sh) and embedded: nothing is fetched from
// another origin, which the Content-Security-Policy forbids anyway.

//go:embed dashboard.html login.html
var pages embed.FS

//go:embed static
var static embed.FS

var templates = template.Must(template.ParseFS(pages, "*.html"))

// staticHandler serves the dashboard's script, styles and chart library
// (package internal/uplot, which the simulate report embeds too).
var staticHandler = func() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree has static/
	}
	files := http.FileServerFS(sub)
	return http.StripPrefix("/admin/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "uplot.min.js":
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
			http.ServeContent(w, r, r.URL.Path, time.Time{}, strings.NewReader(uplot.JS))
		case "uplot.min.css":
			w.Header().Set("Content-Type", "text/css; charset=utf-8")
			http.ServeContent(w, r, r.URL.Path, time.Time{}, strings.NewReader(uplot.CSS))
		default:
			files.ServeHTTP(w, r)
		}
	}))
}()

// pageCSP allows the pages nothing from another origin, no inline script,
// and no framing.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// dashboard serves the dashboard's page, with the CSRF value of the
// request's credentials for its script.
func (h *handler) dashboard(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", pageCSP)
	_ = templates.ExecuteTemplate(w, "dashboard.html", struct {
		CSRF     string
		ReadOnly bool
	}{h.csrf(r), h.access(r).readOnly})
}

// loginPage serves the login form with status and an error message.
func (h *handler) loginPage(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", pageCSP)
	w.WriteHeader(status)
	_ = templates.ExecuteTemplate(w, "login.html", struct{ Error string }{msg})
}
