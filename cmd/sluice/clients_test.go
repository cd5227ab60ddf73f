package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/wire"
)

var update = flag.Bool("update", false, "rewrite the wants of clients/testdata/script.json from the Go client's answers")

// runMainEnv, set to 1, makes the test binary run as sluice itself, so
// that the tests of the clients in other languages can start sluice serve
// as a process of its own without a build (see TestMain).
const runMainEnv = "SLUICE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// clientsDir holds the clients in other languages and the script they
// share with the Go client.
const clientsDir = "../../clients"

// A scriptCall is one call of clients/testdata/script.json.
type scriptCall struct {
	Op      string         `json:"op"`
	Rule    string         `json:"rule,omitempty"`
	Key     string         `json:"key,omitempty"`
	KeyHex  string         `json:"key_hex,omitempty"`
	Cost    int            `json:"cost,omitempty"`
	ID      string         `json:"id,omitempty"`
	Outcome string         `json:"outcome,omitempty"`
	Login   string         `json:"login,omitempty"`
	User    string         `json:"user,omitempty"`
	Address string         `json:"address,omitempty"`
	Ticket  string         `json:"ticket,omitempty"`
	Want    map[string]any `json:"want"`
}

// A formStep is one attempt at the script's login form.
type formStep struct {
	Address  string `json:"address"`
	User     string `json:"user"`
	Password string `json:"password"`
	Want     int    `json:"want,omitempty"`
}

type script struct {
	About []string     `json:"about"`
	Calls []scriptCall `json:"calls"`
	Form  []formStep   `json:"form"`
}

// TestClientScript plays clients/testdata/script.json with the Go client
// against a sluice serve of clients/testdata/sluice.yaml and checks every
// answer against the script's want: the answers the Python, PHP and Ruby
// clients' own tests check theirs against. With -update it writes what
// it saw as the wants instead.
func TestClientScript(t *testing.T) {
	path := filepath.Join(clientsDir, "testdata", "script.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s script
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	url := startServe(t, "-config", filepath.Join(clientsDir, "testdata", "sluice.yaml"), "-watch=false")
	c, err := client.New(client.Config{URL: url, CacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()

	var ticket wire.LoginRequest
	var lease wire.LeaseRef
	for i := range s.Calls {
		call := &s.Calls[i]
		got := playCall(ctx, t, c, call, &ticket, &lease)
		if *update {
			call.Want = got
			continue
		}
		if g, w := mustJSON(t, got), mustJSON(t, call.Want); g != w {
			t.Errorf("call %d %+v = %s, want %s", i, *call, g, w)
		}
	}
	for i := range s.Form {
		st := &s.Form[i]
		got := playForm(ctx, t, c, *st)
		if *update {
			st.Want = got
			continue
		}
		if got != st.Want {
			t.Errorf("form step %d %+v = %d, want %d", i, *st, got, st.Want)
		}
	}
	if *update {
		if err := os.WriteFile(path, formatScript(t, s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// playCall makes one call of the script and returns its answer as the
// script's wants are written.
func playCall(ctx context.Context, t *testing.T, c *client.Client, call *scriptCall, ticket *wire.LoginRequest, lease *wire.LeaseRef) map[string]any {
	t.Helper()
	key := call.Key
	if call.KeyHex != "" {
		b, err := hex.DecodeString(call.KeyHex)
		if err != nil {
			t.Fatal(err)
		}
		key = string(b)
	}
	out := func(err error, m map[string]any) map[string]any {
		switch {
		case err == nil:
			return m
		case errors.Is(err, client.ErrUnavailable):
			return map[string]any{"error": "unavailable"}
		case errors.Is(err, sluice.ErrInvalidRequest):
			// A misconfigured rule or cost names the rule; an unknown
			// reservation is the service's 409, which does not.
			name := call.Rule + call.Login
			if call.Op != "commit" && call.Op != "refund" && !strings.Contains(err.Error(), name) {
				t.Errorf("the error of %+v does not name the rule: %v", *call, err)
			}
			return map[string]any{"error": "invalid"}
		}
		t.Fatalf("%+v: %v", *call, err)
		return nil
	}
	decided := func(d sluice.Decision, err error) map[string]any {
		return out(err, map[string]any{"allowed": d.Allowed, "remaining": d.Remaining, "limit": d.Limit.Rate, "waits": d.RetryAfter > 0})
	}
	outcome := func(r wire.OutcomeResponse, err error) map[string]any {
		return out(err, map[string]any{"allowed": r.Allowed, "remaining": r.Remaining, "limit": r.Limit, "waits": r.RetryAfter > 0, "duplicate": r.Duplicate})
	}
	req := wire.OutcomeRequest{Rule: call.Rule, Key: key, Cost: call.Cost, ID: call.ID, Outcome: call.Outcome}
	switch call.Op {
	case "check":
		return decided(c.CheckN(ctx, call.Rule, key, max(call.Cost, 1)))
	case "peek":
		return decided(c.Peek(ctx, call.Rule, key))
	case "insert":
		return decided(c.Insert(ctx, call.Rule, key, call.Cost))
	case "reset":
		return out(c.Reset(ctx, call.Rule, key), map[string]any{})
	case "reserve":
		return outcome(c.Reserve(ctx, req))
	case "commit":
		return outcome(c.Commit(ctx, req))
	case "refund":
		return outcome(c.Refund(ctx, req))
	case "report":
		return outcome(c.Report(ctx, req))
	case "login_begin":
		*ticket = wire.LoginRequest{Login: call.Login, User: call.User, Address: call.Address}
		r, err := c.LoginBegin(ctx, *ticket)
		ticket.Ticket = r.Ticket
		return out(err, map[string]any{"allowed": r.Allowed, "captcha": r.Captcha, "known_good": r.KnownGood, "delays": r.Delay > 0, "waits": r.RetryAfter > 0})
	case "login_succeed", "login_fail":
		settle := c.LoginFail
		if call.Op == "login_succeed" {
			settle = c.LoginSucceed
		}
		r, err := settle(ctx, *ticket)
		return out(err, map[string]any{"duplicate": r.Duplicate, "banned": r.Banned})
	case "acquire":
		r, err := c.Acquire(ctx, wire.AcquireRequest{Rule: call.Rule, Key: key})
		if r.OK {
			*lease = wire.LeaseRef{Rule: call.Rule, Key: key, ID: r.ID}
		}
		return out(err, map[string]any{"ok": r.OK, "in_use": r.InUse, "limit": r.Limit})
	case "release":
		r, err := c.Release(ctx, *lease)
		return out(err, map[string]any{"ok": r.OK})
	}
	t.Fatalf("unknown op %q", call.Op)
	return nil
}

// playForm plays one attempt at the script's login form as the clients'
// web integrations decide it: form-ip (by address, only failures, reset
// on success), then form-user (by the hashed field user, only failures),
// each reserving a place before the form is checked, the first refusal
// answering 429 and giving back what the limits before it reserved; then
// a failure (401) commits the places, a success refunds them and resets
// form-ip's key.
func playForm(ctx context.Context, t *testing.T, c *client.Client, st formStep) int {
	t.Helper()
	userKey := "(none)"
	if strings.TrimSpace(st.User) != "" {
		r := httpRequestWithForm(t, "user", st.User)
		k, ok := httplimit.FormField("user", httplimit.FormFieldOptions{}).Key(r)
		if !ok {
			t.Fatalf("no key for user %q", st.User)
		}
		userKey = k
	}
	var taken []wire.OutcomeRequest
	for _, rk := range [][2]string{{"form-ip", st.Address}, {"form-user", userKey}} {
		req := wire.OutcomeRequest{Rule: rk[0], Key: rk[1], ID: randomID(t)}
		r, err := c.Reserve(ctx, req)
		if err != nil {
			t.Fatalf("reserve %+v: %v", req, err)
		}
		if !r.Allowed {
			for _, h := range taken {
				if _, err := c.Refund(ctx, h); err != nil {
					t.Fatal(err)
				}
			}
			return 429
		}
		taken = append(taken, req)
	}
	status := 401
	if st.Password == "right" {
		status = 200
	}
	for _, h := range taken {
		var err error
		if status == 401 {
			_, err = c.Commit(ctx, h)
		} else {
			_, err = c.Refund(ctx, h)
			if err == nil && h.Rule == "form-ip" {
				err = c.Reset(ctx, h.Rule, h.Key)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return status
}

// httpRequestWithForm returns a POST of a form with one field.
func httpRequestWithForm(t *testing.T, name, value string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{name: {value}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return r
}

func randomID(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// formatScript writes the script with one call or step a line, so that a
// change of a want shows as the change of one line.
func formatScript(t *testing.T, s script) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("{\n  \"about\": [\n")
	for i, a := range s.About {
		fmt.Fprintf(&b, "    %s%s\n", mustJSON(t, a), comma(i, len(s.About)))
	}
	b.WriteString("  ],\n  \"calls\": [\n")
	for i, c := range s.Calls {
		fmt.Fprintf(&b, "    %s%s\n", mustJSON(t, c), comma(i, len(s.Calls)))
	}
	b.WriteString("  ],\n  \"form\": [\n")
	for i, st := range s.Form {
		fmt.Fprintf(&b, "    %s%s\n", mustJSON(t, st), comma(i, len(s.Form)))
	}
	b.WriteString("  ]\n}\n")
	return b.Bytes()
}

func comma(i, n int) string {
	if i < n-1 {
		return ","
	}
	return ""
}
