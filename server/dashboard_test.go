package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/testing/rlqstest"
	"github.com/sluicehq/sluice/internal/testing/rlstest"
	"github.com/sluicehq/sluice/internal/testing/testserver"
	"github.com/sluicehq/sluice/server/envoyrls"
	"github.com/sluicehq/sluice/wire"
)

const browserRules = `rules:
  - name: api
    limits: ["20/s"]
  - name: login
    limits: ["3/min"]
  - name: signup
    limits: ["1/min"]
    shadow: true
guard:
  deny: [198.51.100.0/24]
  jails:
    - {name: abuse, rules: [login], max_failures: 5, find_time: 1m, ban_time: 10m}
admin:
  token: test-token-0123456789
quota:
  buckets:
    - {domain: edge, rule: api}
`

// attacker is the address the test's traffic tries to log in from.
const attacker = "203.0.113.7"

// browser starts headless Chromium for the test, in a fresh profile, and
// returns its context: a missing chromium fails the test under CI=true.
func browser(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	bin := testserver.Binary(t, "chromium", "/usr/lib/chromium")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("mute-audio", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	return bctx
}

// run runs browser actions, failing the test with what they were doing.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval returns the value of a JavaScript expression in the page,
// awaiting it when it is a promise.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, func(p *runtime.EvaluateParams) { p.AwaitPromise = new(true) }))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// poll waits until the JavaScript expression is true in the page.
func poll(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(25*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 3000)`))
		t.Fatalf("waiting for %s: %v; the page shows:\n%s", what, err, page)
	}
}

// traffic sends takes to the HTTP API until stop is called: api for a
// few keys, some over the limit, and logins from the attacker.
func traffic(t *testing.T, url string) (stop func()) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ctx.Err() == nil && i < 6000; i++ {
			body := fmt.Sprintf(`{"rule":"api","key":"client-%d"}`, i%3)
			switch i % 10 {
			case 0:
				body = `{"rule":"login","key":"` + attacker + `"}`
			case 5:
				body = `{"rule":"signup","key":"bot-signup"}`
			}
			req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/check", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if res, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// adminBans lists the bans through the admin API, as the CLI does.
func adminBans(t *testing.T, url string) []wire.Ban {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url+"/admin/api/bans", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var bans []wire.Ban
	if err := json.NewDecoder(res.Body).Decode(&bans); err != nil {
		t.Fatal(err)
	}
	return bans
}

func banned(bans []wire.Ban, key string) bool {
	for _, b := range bans {
		if b.Key == key {
			return true
		}
	}
	return false
}

// TestDashboardBrowser drives the dashboard in headless Chromium while
// the test sends traffic: refused without the token, signed in it sees
// the rates move, the attacker among the top limited keys and banned by
// the jail, lifts the ban with a click (checked through the admin API),
// bans and lists by form, and fits a phone's width. With env
// SLUICE_DASHBOARD_SCREENSHOT=FILE it saves a screenshot of the main view.
func TestDashboardBrowser(t *testing.T) {
	testserver.SkipShort(t, "starts Chromium")
	c, err := config.Parse("test.yaml", []byte(browserRules))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewService(t.Context(), c, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	api, adm := httptest.NewServer(s.Handler()), httptest.NewServer(s.AdminHandler())
	t.Cleanup(api.Close)
	t.Cleanup(adm.Close)
	t.Cleanup(s.admin.Feed().Close) // ends the page's stream, which adm.Close would wait for
	// A key that is markup must show as text.
	const evil = `<img src=x id=pwned onerror="document.title='pwned'">`
	if _, err := s.admin.Ban(t.Context(), ManualJail, banEntry("key:"+evil), time.Hour, "markup"); err != nil {
		t.Fatal(err)
	}
	// A ban merged at capacity, as a registry at capacity makes it (or a
	// replica learns it): it shows what it covers beyond its offenders.
	now := time.Now()
	if _, err := s.st.registry.Put(t.Context(), guard.Ban{Jail: "abuse", Key: "198.18.0.0/24", Reason: "40 bans merged at capacity",
		Since: now, Until: now.Add(time.Hour), Offences: 1, Collateral: 216}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	b := browser(t, ctx)
	refusedWithoutToken(t, b, adm.URL)
	signIn(t, b, adm.URL)

	stop := traffic(t, api.URL)
	defer stop()
	poll(t, b, "api's rates to move", `(() => {
		const row = document.querySelector('#rules tr[data-rule="api"]');
		return row && parseFloat(row.querySelector('[data-rate="allowed"]').textContent) > 0 && parseFloat(row.querySelector('[data-rate="denied"]').textContent) > 0;
	})()`)
	poll(t, b, "the charts", `document.querySelectorAll('[data-chart] canvas').length === 3`)
	poll(t, b, "the shadow rule's would-be denials", `(() => {
		const r = document.querySelector('#top tr[data-rule="signup"][data-key="bot-signup"] [data-f="state"]');
		return r && r.textContent.includes('would be denied');
	})()`)
	poll(t, b, "the attacker banned among the top limited keys",
		`!!document.querySelector('#top tr[data-rule="login"][data-key="`+attacker+`"][data-state="banned"] button[data-action="lift"]')`)
	stop() // the jail would ban again
	accountsForRefusals(t, b, api.URL)
	if path := os.Getenv("SLUICE_DASHBOARD_SCREENSHOT"); path != "" {
		screenshot(t, b, path)
	}
	liftByClick(t, b, adm.URL)
	banAndListByForm(t, b, adm.URL)

	poll(t, b, "the collateral of the merged ban", `(() => {
		const c = document.querySelector('#bans tr[data-ban="198.18.0.0/24"] [data-f="collateral"]');
		return c && c.textContent === '+216 addresses' && c.classList.contains('warn');
	})()`)
	poll(t, b, "no collateral for a ban of what was banned", `document.querySelector('#bans tr[data-ban="192.0.2.0/24"] [data-f="collateral"]').textContent === '—'`)
	// Strikes a jail could not count, as its store at its cap told it.
	s.m.strikeLost("abuse", guard.StrikeForgotten)
	s.m.strikeLost("abuse", guard.StrikeForgotten)
	s.m.strikeLost("abuse", guard.StrikeEstimated)
	poll(t, b, "the strikes the jails lost", `(() => {
		const p = document.querySelector('#strikes-lost');
		return p.textContent.includes('abuse: 1 estimated, 2 forgotten') && p.classList.contains('warn');
	})()`)
	// An Envoy-like edge subscribes to a quota bucket and reports.
	g := envoyrls.NewServer(s.RateLimitService())
	s.QuotaService().Register(g)
	edge, err := rlqstest.New(rlqstest.Config{Targets: []string{rlstest.ListenGRPC(t, g)}, Domain: "edge", Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(edge.Close)
	for range 3 {
		edge.Allow(map[string]string{"name": "x"})
	}
	poll(t, b, "the edge's share and reports", `(() => {
		const r = document.querySelector('#quota tr[data-bucket="api"]');
		const f = (n) => r && r.querySelector('[data-f="' + n + '"]').textContent;
		return f('clients') === '1' && +f('assigned') > 0 && f('allowed') === '3';
	})()`)
	poll(t, b, "the markup key shown as text", `[...document.querySelectorAll('#bans code')].some(c => c.textContent.includes('<img src=x'))`)
	if title, pwned := eval[string](t, b, `document.title`), eval[bool](t, b, `!!document.getElementById('pwned')`); title == "pwned" || pwned {
		t.Error("a ban's key ran as markup in the dashboard")
	}
	narrowScreen(t, b)
}

// refusedWithoutToken checks that, before signing in, the dashboard sends
// the browser to the login page and the API refuses it.
func refusedWithoutToken(t *testing.T, b context.Context, url string) {
	t.Helper()
	run(t, b, "opening the dashboard without the token",
		chromedp.Navigate(url+"/admin/"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)))
	loc := eval[string](t, b, `location.href`)
	statuses := eval[[]int](t, b, `Promise.all(['/admin/api/bans', '/admin/api/events', '/admin/api/rules'].map(p => fetch(p).then(r => r.status)))`)
	if !strings.HasSuffix(loc, "/admin/login") || fmt.Sprint(statuses) != "[401 401 401]" {
		t.Fatalf("without the token: at %s, API answers %v; want the login page and 401s", loc, statuses)
	}
	run(t, b, "signing in with a wrong token",
		chromedp.SendKeys(chromedp.CSS(`#token`), "not-the-token-at-all"),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.CSS(`.error`)))
	if msg := eval[string](t, b, `document.querySelector('.error').textContent`); msg != "Wrong token." {
		t.Errorf("wrong token: %q", msg)
	}
}

func signIn(t *testing.T, b context.Context, url string) {
	t.Helper()
	run(t, b, "signing in",
		chromedp.Navigate(url+"/admin/login"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), adminToken),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-state="live"]`)))
}

// confirm answers the page's confirmation dialog: Confirm or Cancel.
func confirm(t *testing.T, b context.Context, ok bool) {
	t.Helper()
	button := `#confirm-cancel`
	if ok {
		button = `#confirm-ok`
	}
	run(t, b, "confirming", chromedp.WaitVisible(chromedp.CSS(button)), chromedp.Click(chromedp.CSS(button)),
		chromedp.WaitNotVisible(chromedp.CSS(`#confirm`)))
}

// liftByClick lifts the attacker's ban from the top keys: Cancel keeps
// it, Confirm lifts it, as the admin API then says.
func liftByClick(t *testing.T, b context.Context, url string) {
	t.Helper()
	lift := `#top tr[data-rule="login"][data-key="` + attacker + `"] button[data-action="lift"]`
	run(t, b, "clicking Lift ban", chromedp.Click(chromedp.CSS(lift)))
	confirm(t, b, false)
	if !banned(adminBans(t, url), attacker) {
		t.Fatal("Cancel lifted the ban")
	}
	run(t, b, "clicking Lift ban again", chromedp.Click(chromedp.CSS(lift)))
	confirm(t, b, true)
	poll(t, b, "the notice", `document.querySelector('#notice').textContent.startsWith('Done: Lift the ban of `+attacker+`')`)
	if banned(adminBans(t, url), attacker) {
		t.Fatal("the ban is still in force after Lift ban was confirmed")
	}
	poll(t, b, "the top key no longer banned", `(() => {
		const r = document.querySelector('#top tr[data-rule="login"][data-key="`+attacker+`"]');
		return r && r.dataset.state !== 'banned';
	})()`)
}

// banAndListByForm bans a network and deny-lists a key with the forms.
func banAndListByForm(t *testing.T, b context.Context, url string) {
	t.Helper()
	run(t, b, "filling the ban form",
		chromedp.SendKeys(chromedp.CSS(`#ban-form input[name="key"]`), "192.0.2.0/24"),
		chromedp.SetValue(chromedp.CSS(`#ban-form input[name="duration"]`), "30m"),
		chromedp.SendKeys(chromedp.CSS(`#ban-form input[name="reason"]`), "from the form"),
		chromedp.Click(chromedp.CSS(`#ban-form button[type="submit"]`)))
	confirm(t, b, true)
	poll(t, b, "the network's ban listed", `!!document.querySelector('#bans tr[data-ban="192.0.2.0/24"]')`)
	var found bool
	for _, ban := range adminBans(t, url) {
		found = found || ban.Key == "192.0.2.0/24" && ban.Reason == "from the form" && ban.Until.Sub(ban.Since).Round(time.Minute) == 30*time.Minute
	}
	if !found {
		t.Error("the ban made with the form is not in the admin API's list, for 30m with its reason")
	}
	deny := `.list[data-list="deny"] `
	run(t, b, "deny-listing a key",
		chromedp.SendKeys(chromedp.CSS(deny+`input[name="entry"]`), "key:scraper"),
		chromedp.Click(chromedp.CSS(deny+`button[type="submit"]`)))
	confirm(t, b, true)
	poll(t, b, "the entry listed", `[...document.querySelectorAll('.list[data-list="deny"] code')].some(c => c.textContent === 'key:scraper')`)
	if l, _ := denyList(t, url); !strings.Contains(l, "key:scraper") {
		t.Errorf("deny list through the API = %s, want key:scraper", l)
	}
}

// denyList returns the deny list through the admin API.
func denyList(t *testing.T, url string) (string, error) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url+"/admin/api/lists/deny", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return string(body), err
}

// narrowScreen checks that the page fits a phone's width: no horizontal
// scrolling of the page itself (wide tables scroll in their own box).
func narrowScreen(t *testing.T, b context.Context) {
	t.Helper()
	run(t, b, "narrowing the screen", chromedp.EmulateViewport(390, 844))
	poll(t, b, "the page to fit 390 px without scrolling sideways", `window.innerWidth === 390 && document.documentElement.scrollWidth <= window.innerWidth`)
}

func screenshot(t *testing.T, b context.Context, path string) {
	t.Helper()
	png, err := chromedp.Run(b, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatalf("taking a screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// metricRefusals sums the refusals /metrics at url counts: takes denied
// by a limit or on an estimate, and requests the guard refused by a ban
// or the deny list.
func metricRefusals(t *testing.T, url string) int {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for line := range strings.Lines(string(body)) {
		take := strings.HasPrefix(line, "sluice_decisions_total{") && strings.Contains(line, `op="take"`) &&
			(strings.Contains(line, `result="denied"`) || strings.Contains(line, `result="estimated"`))
		guarded := strings.HasPrefix(line, "sluice_guard_total{") && (strings.Contains(line, `action="banned"`) || strings.Contains(line, `action="deny-list"`))
		if take || guarded {
			var v float64
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			n += v
		}
	}
	return int(n)
}

// accountsForRefusals checks that the page accounts for at least 99% of
// the refusals /metrics counts, and for no more than it counts, once the
// traffic stopped: the sum of each rule's totals by cause.
func accountsForRefusals(t *testing.T, b context.Context, url string) {
	t.Helper()
	want := metricRefusals(t, url)
	page := `[...document.querySelectorAll('#rules [data-total]')].filter(c => c.dataset.total !== 'allowed')
		.reduce((n, c) => n + (parseInt(c.textContent.replaceAll(',', ''), 10) || 0), 0)`
	_, err := chromedp.Run(b, chromedp.Poll[bool](fmt.Sprintf(`(%s) >= %d`, page, want*99/100),
		chromedp.WithPollingTimeout(10*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
	got := eval[int](t, b, page)
	t.Logf("refusals: the page shows %d, /metrics counts %d", got, want)
	if err != nil || want == 0 || got > want {
		t.Errorf("the page shows %d refusals, /metrics counts %d: want 99%% to 100%% of them", got, want)
	}
	if banned := eval[string](t, b, `document.querySelector('#rules tr[data-rule="login"] [data-total="banned"]').textContent`); banned == "0" {
		t.Errorf("refused by a ban, login: %s, want the jail's ban to have refused the attacker", banned)
	}
}

// TestDashboardWallboard opens the dashboard as a wallboard or a
// scripted screenshot does, with Chromium alone and the token in the
// URL: with ?auth=basic the server challenges, Chromium answers with the
// URL's credentials and gets the dashboard; without it, the sign-in page.
// (That its script then draws the page, fetching absolute URLs, which
// carry no credentials, is what scripts/readme-screenshot.sh shows.)
func TestDashboardWallboard(t *testing.T) {
	testserver.SkipShort(t, "starts Chromium")
	bin := testserver.Binary(t, "chromium", "/usr/lib/chromium")
	s, _ := newService(t, serviceConfig)
	adm := httptest.NewServer(s.AdminHandler())
	t.Cleanup(adm.Close)
	t.Cleanup(s.admin.Feed().Close)
	host := strings.TrimPrefix(adm.URL, "http://")
	for _, tt := range []struct {
		path, want, not string
	}{
		{"/admin/?auth=basic", `id="rules"`, `id="token"`},
		{"/admin/", `id="token"`, `id="rules"`},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
			"--user-data-dir="+t.TempDir(), "--dump-dom", "http://admin:"+adminToken+"@"+host+tt.path)
		out, err := cmd.Output()
		cancel()
		if err != nil || !strings.Contains(string(out), tt.want) || strings.Contains(string(out), tt.not) {
			t.Errorf("chromium --dump-dom http://admin:TOKEN@…%s: %v; want a page with %s and without %s:\n%.500s", tt.path, err, tt.want, tt.not, out)
		}
	}
}
