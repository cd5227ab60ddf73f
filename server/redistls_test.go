package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testing/testcert"
	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// TestRedisTLSAndACL runs the service on a Redis that takes only TLS
// clients with a certificate, as an ACL user, in database 3: the rate
// states and the bans both land there, and neither a wrong password, a
// missing client certificate nor an unknown authority gets through. The
// password, read from a file, never reaches the log or an error.
func TestRedisTLSAndACL(t *testing.T) {
	ca := testcert.NewCA(t)
	srv := ca.Server(t, "redis")
	ca.Client(t, "client", "sluice") // client.crt, client.key beside ca.crt
	r := testserver.StartRedisTLS(t, srv.CertFile, srv.KeyFile, ca.CertFile, "yes")
	const password = "acl-password-in-a-file"
	if _, err := r.Do("ACL", "SETUSER", "sluice", "on", ">"+password, "~*", "&*", "+@all"); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	dir := filepath.Dir(ca.CertFile)
	if err := os.WriteFile(filepath.Join(dir, "redis-password"), []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	redisSection := func(password, tls string) string {
		return fmt.Sprintf("store:\n  type: redis\n  redis:\n    addrs: [%q]\n    username: sluice\n    %s\n    db: 3\n    tls: %s\n", r.TLSAddr, password, tls)
	}
	const rules = "rules: [{name: web, limits: [\"2/min\"]}]\n"
	good := "{ca_file: ca.crt, cert_file: client.crt, key_file: client.key}"

	logs := &syncBuffer{}
	s := newServiceAt(t, filepath.Join(dir, "s.yaml"), redisSection("password_file: redis-password", good)+rules, logs)
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		if code := auth(t, s.Handler(), "", "203.0.113.7").Code; code != want {
			t.Errorf("check %d over TLS = %d, want %d", i, code, want)
		}
	}
	if _, err := s.admin.Ban(t.Context(), ManualJail, banEntry("198.51.100.1"), time.Hour, "test"); err != nil {
		t.Fatalf("Ban over TLS: %v", err)
	}
	keys, err := testserver.RedisDoAll(r.Addr, []string{"SELECT", "3"}, []string{"KEYS", "*"})
	if err != nil || !strings.Contains(keys[1], ":bans") || strings.Count(keys[1], "\n") < 1 {
		t.Errorf("keys in db 3 = %q, %v; want the rate state and the bans", keys, err)
	}

	for _, tt := range []struct{ name, password, tls string }{
		{"wrong password", "password: not-" + password, good},
		{"no client certificate", "password_file: redis-password", "{ca_file: ca.crt}"},
		{"unknown authority", "password_file: redis-password", "{cert_file: client.crt, key_file: client.key}"},
	} {
		c, err := config.Parse(filepath.Join(dir, "bad.yaml"), []byte(redisSection(tt.password, tt.tls)+rules))
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewService(context.Background(), c, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err == nil {
			s.Close()
			t.Errorf("%s: NewService succeeded, want an error", tt.name)
		} else if strings.Contains(err.Error(), password) {
			t.Errorf("%s: the error holds the password: %v", tt.name, err)
		}
	}
	if strings.Contains(logs.String(), password) {
		t.Errorf("the log holds the password:\n%s", logs)
	}
}

// newServiceAt returns a Service of the configuration text, parsed as
// the file name (relative paths are read from its directory), logging
// to logs, closed when the test ends.
func newServiceAt(t *testing.T, name, text string, logs *syncBuffer) *Service {
	t.Helper()
	c, err := config.Parse(name, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewService(context.Background(), c, Options{
		Logger:    slog.New(slog.NewTextHandler(logs, nil)),
		Namespace: fmt.Sprintf("tls%d", time.Now().UnixNano()),
	})
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
