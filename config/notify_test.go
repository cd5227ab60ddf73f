package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseNotify(t *testing.T) {
	t.Setenv("SLUICE_TEST_HOOK_SECRET", "hook-secret")
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Parse("notify.yaml", []byte(twoRules+`guard:
  notify:
    - {type: webhook, url: "https://hooks.example.com/sluice", secret_env: SLUICE_TEST_HOOK_SECRET}
  jails:
    - name: abuse
      rules: [login]
      notify:
        - {name: soc, type: webhook, url: "http://127.0.0.1:9000/", secret_file: `+secretFile+`, events: [ban], queue: 50, attempts: 3, timeout: 2s}
        - {type: exec, argv: ["/usr/local/bin/block", "{key}", "{until}"], workers: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	wantAll := []Notify{{Name: "all.webhook.0", Type: NotifyWebhook, URL: "https://hooks.example.com/sluice", Secret: "hook-secret"}}
	wantJail := []Notify{
		{Name: "soc", Type: NotifyWebhook, URL: "http://127.0.0.1:9000/", Secret: "file-secret", Events: []string{"ban"}, Queue: 50, Attempts: 3, Timeout: 2 * time.Second},
		{Name: "abuse.exec.1", Type: NotifyExec, Argv: []string{"/usr/local/bin/block", "{key}", "{until}"}, Workers: 2},
	}
	if !reflect.DeepEqual(c.Guard.Notify, wantAll) {
		t.Errorf("guard.notify = %+v, want %+v", c.Guard.Notify, wantAll)
	}
	if !reflect.DeepEqual(c.Guard.Jails[0].Notify, wantJail) {
		t.Errorf("guard.jails[0].notify = %+v, want %+v", c.Guard.Jails[0].Notify, wantJail)
	}
	if !wantJail[0].Wants("ban") || wantJail[0].Wants("lift") || !wantJail[1].Wants("expire") {
		t.Error("Wants does not follow events")
	}
}

// TestParseNotifyErrors: every mistake of the notify entries is reported
// in one run, each naming its line and field.
func TestParseNotifyErrors(t *testing.T) {
	_, err := Parse("bad.yaml", []byte(twoRules+`guard:
  notify:
    - {type: pager, url: "https://example.com/"}
    - {type: webhook, url: "ftp://example.com/", secret: x}
    - {type: webhook, url: "https://example.com/"}
    - {type: exec, argv: []}
  jails:
    - name: abuse
      rules: [login]
      notify:
        - {type: exec, argv: ["block", "{key}"]}
        - {type: exec, argv: ["/bin/block", "{user}"], events: [unban]}
        - {name: dup, type: exec, argv: ["/bin/block"]}
        - {name: dup, type: exec, argv: ["/bin/block"], url: "https://example.com/"}
        - {type: webhook, url: "https://example.com/", secret: x, timeout: 1h, queue: -1}
`))
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	for _, want := range []string{
		`bad.yaml:8:14: guard.notify[0].type: unknown notify type "pager" (want webhook or exec)`,
		`bad.yaml:9:28: guard.notify[1].url: notify: url "ftp://example.com/": want an http or https URL`,
		`bad.yaml:10:7: guard.notify[2].secret: a webhook needs a secret`,
		`bad.yaml:11:26: guard.notify[3].argv: notify: exec needs argv`,
		`bad.yaml:16:30: guard.jails[0].notify[0].argv: notify: exec program "block" must be an absolute path`,
		`bad.yaml:17:30: guard.jails[0].notify[1].argv: notify: exec argv[1] "{user}": unknown placeholder {user}`,
		`bad.yaml:17:65: guard.jails[0].notify[1].events[0]: unknown event "unban"`,
		`bad.yaml:19:18: guard.jails[0].notify[3].name: a notify sink named "dup" is already defined`,
		`bad.yaml:19:62: guard.jails[0].notify[3].url: url and secret are for a webhook, not for exec`,
		`bad.yaml:20:87: guard.jails[0].notify[4].queue: queue -1 must be 0`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q; got:\n%v", want, err)
		}
	}
	if _, err := Parse("bad.yaml", []byte(twoRules+"guard:\n  notify:\n    - {type: webhook, ur1: x}\n")); err == nil || !strings.Contains(err.Error(), `bad.yaml:8:23: guard.notify[0]: unknown field "ur1"; did you mean "url"?`) {
		t.Errorf("a misspelled field: %v", err)
	}
}
