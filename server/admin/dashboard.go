package admin

import (
	_ "embed"
	"html/template"
	"net/http"
	"time"
)

//go:embed dashboard.html
var dashboardHTML string

var dashboardTmpl = template.Must(template.New("dashboard").Funcs(template.FuncMap{
	"ago": func(t time.Time) string { return time.Since(t).Round(time.Second).String() },
	"left": func(t time.Time) string {
		return max(time.Until(t), 0).Round(time.Second).String()
	},
}).Parse(dashboardHTML))

// dashboardData is what the dashboard shows.
type dashboardData struct {
	Rules   []RuleView
	Bans    []Ban
	BansErr string
	Denials []Denial
	Allow   []string
	Deny    []string
}

// dashboard renders the state of the service on the server: no script,
// nothing to build, readable in any browser and with curl.
func (h *handler) dashboard(w http.ResponseWriter, r *http.Request) {
	d := dashboardData{Rules: h.b.Rules(), Denials: h.b.Denials()}
	if len(d.Denials) > 50 {
		d.Denials = d.Denials[:50]
	}
	var err error
	if d.Bans, err = h.b.Bans(r.Context()); err != nil {
		d.BansErr = "the store failed; bans cannot be listed now"
	}
	d.Allow, _ = h.b.List("allow")
	d.Deny, _ = h.b.List("deny")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Header().Set("X-Frame-Options", "DENY")
	_ = dashboardTmpl.Execute(w, d)
}
