package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/server/admin"
	"github.com/sluicehq/sluice/wire"
)

const token = "test-token-0123456789"

// recorder is a Backend that records the list edits and bans it is
// asked for, as "op list-or-jail entry"; the methods it does not define
// are the nil interface's.
type recorder struct {
	admin.Backend
	calls []string
}

func (r *recorder) Add(name string, e guard.Entry) error {
	r.calls = append(r.calls, "add "+name+" "+e.String())
	return nil
}

func (r *recorder) Remove(name string, e guard.Entry) error {
	r.calls = append(r.calls, "remove "+name+" "+e.String())
	return nil
}

func (r *recorder) Ban(_ context.Context, jail string, e guard.Entry, _ time.Duration, _ string) (wire.Ban, error) {
	r.calls = append(r.calls, "ban "+jail+" "+e.String())
	return wire.Ban{Jail: jail}, nil
}

func (r *recorder) Lift(_ context.Context, jail string, e guard.Entry) error {
	r.calls = append(r.calls, "lift "+jail+" "+e.String())
	return nil
}

func (r *recorder) LiftEvery(_ context.Context, e guard.Entry) ([]wire.Ban, error) {
	r.calls = append(r.calls, "lift every "+e.String())
	return []wire.Ban{{Jail: "abuse", Key: e.String()}}, nil
}

// Bans are two in one /24 and one beside it.
func (r *recorder) Bans(context.Context) ([]wire.Ban, error) {
	return []wire.Ban{{Jail: "abuse", Key: "198.51.100.7"}, {Jail: "manual", Key: "198.51.100.0/25"}, {Jail: "abuse", Key: "198.51.101.1"}}, nil
}

// TestEntries: the handler reads the entries of list edits and bans once,
// as guard.ParseEntry does (a ban's bare name is a key), and hands the
// backend typed entries; an entry that is none is a 400 naming it, and
// reaches no backend.
func TestEntries(t *testing.T) {
	tests := []struct {
		method, path, body string
		want               int
		call               string // what the backend was asked; "" for nothing
	}{
		{"POST", "/admin/api/lists/deny", `{"entry":"203.0.113.9/24"}`, 204, "add deny 203.0.113.0/24"},
		{"POST", "/admin/api/lists/allow", `{"entry":"key:ops"}`, 204, "add allow key:ops"},
		{"DELETE", "/admin/api/lists/deny?entry=%3A%3Affff%3A192.0.2.1", "", 204, "remove deny 192.0.2.1"},
		{"POST", "/admin/api/lists/deny", `{"entry":"ops"}`, 400, ""},
		{"POST", "/admin/api/lists/deny", `{"entry":"key:"}`, 400, ""},
		{"DELETE", "/admin/api/lists/deny?entry=10.0.0.300", "", 400, ""},
		{"POST", "/admin/api/bans", `{"jail":"manual","key":"198.51.100.7"}`, 201, "ban manual 198.51.100.7"},
		{"POST", "/admin/api/bans", `{"jail":"manual","key":"key:mallory"}`, 201, "ban manual key:mallory"},
		{"POST", "/admin/api/bans", `{"jail":"manual","key":"mallory"}`, 201, "ban manual key:mallory"},
		{"DELETE", "/admin/api/bans?jail=manual&key=2001:db8::/48", "", 204, "lift manual 2001:db8::/48"},
		{"DELETE", "/admin/api/bans?key=203.0.113.7", "", 200, "lift every 203.0.113.7"},
		{"DELETE", "/admin/api/bans?key=mallory", "", 200, "lift every key:mallory"},
		{"DELETE", "/admin/api/bans?within=198.51.100.0/24", "", 200, "lift abuse 198.51.100.7; lift manual 198.51.100.0/25"},
		{"DELETE", "/admin/api/bans?within=198.51.100.0/24&jail=abuse", "", 200, "lift abuse 198.51.100.7"},
		{"DELETE", "/admin/api/bans?within=192.0.2.0/24", "", 404, ""},
		{"DELETE", "/admin/api/bans?within=nonsense", "", 400, ""},
		{"DELETE", "/admin/api/bans?within=198.51.100.0/24&key=x", "", 400, ""},
		{"DELETE", "/admin/api/bans?jail=manual", "", 400, ""},
	}
	for _, tt := range tests {
		b := &recorder{}
		h, err := admin.Handler(b, admin.Config{Token: token})
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if got := strings.Join(b.calls, "; "); w.Code != tt.want || got != tt.call {
			t.Errorf("%s %s %s = %d, asked %q; want %d, %q", tt.method, tt.path, tt.body, w.Code, got, tt.want, tt.call)
		}
		if tt.want == http.StatusBadRequest && strings.Contains(tt.path, "lists") && !strings.Contains(w.Body.String(), "entry") {
			t.Errorf("%s %s %s: %s, want an error that names the entry", tt.method, tt.path, tt.body, w.Body)
		}
	}
}
