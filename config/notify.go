package config

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/guard/notify"
)

// Types of a Notify.
const (
	// NotifyWebhook posts each event, signed, to a URL.
	NotifyWebhook = "webhook"
	// NotifyExec runs a command for each event, never through a shell.
	NotifyExec = "exec"
)

// Bounds of a Notify's fields.
const (
	maxNotifyQueue    = 1_000_000
	maxNotifyWorkers  = 64
	maxNotifyAttempts = 100
	maxNotifyTimeout  = 10 * time.Minute
)

// A Notify tells of bans, lifts and expiries: a webhook or a command
// (package guard/notify), fed from a bounded queue that never holds up a
// decision. Zero fields take the defaults of guard/notify, but for the
// ones noted.
type Notify struct {
	// Name names the sink in metrics and logs: 1 to 64 letters, digits,
	// '_', '-' or '.', unique. Default the jail's name (or "all" for the
	// guard's), the type and the index: "login.webhook.0".
	Name string
	// Type is NotifyWebhook or NotifyExec. Required.
	Type string
	// URL receives a webhook's events: http or https. Required for a
	// webhook.
	URL string
	// Secret signs a webhook's requests (HMAC-SHA256). Required for a
	// webhook; the file may name an environment variable (secret_env) or
	// a file (secret_file) holding it instead.
	Secret string
	// Argv is an exec's program, an absolute path, and its arguments,
	// with placeholders such as {key} and {until} (notify.Placeholders).
	// Required for an exec.
	Argv []string
	// Events are the kinds told: "ban", "lift", "expire". Default all.
	Events []string
	// Queue bounds the events waiting. Default 1000.
	Queue int
	// Workers is how many events are delivered (commands run) at once.
	// Default 1.
	Workers int
	// Attempts bounds the tries of each event. Default 5 for a webhook,
	// 1 for an exec.
	Attempts int
	// Timeout bounds each try: a command still running then is killed
	// with its process group. Default 5s for a webhook, 30s for an exec.
	Timeout time.Duration
}

// Wants reports whether n tells of events of kind.
func (n Notify) Wants(kind string) bool { return len(n.Events) == 0 || slices.Contains(n.Events, kind) }

type fileNotify struct {
	Name       string        `yaml:"name"`
	Type       string        `yaml:"type"`
	URL        string        `yaml:"url"`
	Secret     string        `yaml:"secret"`
	SecretEnv  string        `yaml:"secret_env"`
	SecretFile string        `yaml:"secret_file"`
	Argv       []string      `yaml:"argv"`
	Events     []string      `yaml:"events"`
	Queue      int           `yaml:"queue"`
	Workers    int           `yaml:"workers"`
	Attempts   int           `yaml:"attempts"`
	Timeout    time.Duration `yaml:"timeout"`
}

// notifications validates the notify sections of the guard and of its
// jails into g, and returns every error they hold.
func (f *fileGuard) notifications(v *validator, g *Guard) error {
	names := map[string]bool{}
	var errs []error
	g.Notify = sinks(v, at("guard", "notify"), "all", f.Notify, names, &errs)
	for i, fj := range f.Jails {
		ns := sinks(v, at("guard", "jails", i, "notify"), fj.Name, fj.Notify, names, &errs)
		if i < len(g.Jails) && g.Jails[i].Name == fj.Name {
			g.Jails[i].Notify = ns
		}
	}
	return errors.Join(errs...)
}

// sinks validates the notify entries at path, of the jail named owner,
// appending their errors to errs.
func sinks(v *validator, path []any, owner string, fs []fileNotify, names map[string]bool, errs *[]error) []Notify {
	var out []Notify
	for i, fn := range fs {
		p := append(path[:len(path):len(path)], i)
		n, err := fn.notify(v, p)
		if n.Name == "" {
			n.Name = fmt.Sprintf("%s.%s.%d", owner, n.Type, i)
		}
		if err != nil {
			*errs = append(*errs, err)
		}
		switch {
		case !ruleName.MatchString(n.Name):
			*errs = append(*errs, v.errorf(append(p, "name"), "name %q must be 1 to 64 letters, digits, '_', '-' or '.'", n.Name))
		case names[n.Name]:
			*errs = append(*errs, v.errorf(append(p, "name"), "a notify sink named %q is already defined", n.Name))
		}
		names[n.Name] = true
		out = append(out, n)
	}
	return out
}

// notify validates one notify entry at path, every field.
func (f *fileNotify) notify(v *validator, path []any) (Notify, error) {
	n := Notify{Name: f.Name, Type: f.Type, URL: f.URL, Argv: f.Argv, Events: f.Events,
		Queue: f.Queue, Workers: f.Workers, Attempts: f.Attempts, Timeout: f.Timeout}
	var errs []error
	sub := func(field string) []any { return append(path[:len(path):len(path)], field) }
	fail := func(field, format string, args ...any) { errs = append(errs, v.errorf(sub(field), format, args...)) }
	switch n.Type {
	case NotifyWebhook:
		var err error
		if n.Secret, err = secret(v, path, f.Secret, f.SecretEnv, f.SecretFile, "secret"); err != nil {
			errs = append(errs, err)
		} else if n.Secret == "" {
			fail("secret", "a webhook needs a secret to sign with (secret, secret_env or secret_file)")
		}
		if err := notify.CheckURL(n.URL); err != nil {
			fail("url", "%v", err)
		}
		if len(n.Argv) > 0 {
			fail("argv", "argv is for exec, not for a webhook")
		}
	case NotifyExec:
		if err := notify.CheckArgv(n.Argv); err != nil {
			fail("argv", "%v", err)
		}
		if n.URL != "" || f.Secret != "" || f.SecretEnv != "" || f.SecretFile != "" {
			fail("url", "url and secret are for a webhook, not for exec")
		}
	default:
		fail("type", "unknown notify type %q (want %s or %s)", n.Type, NotifyWebhook, NotifyExec)
	}
	for i, e := range n.Events {
		if !slices.Contains([]string{string(notify.Ban), string(notify.Lift), string(notify.Expire)}, e) {
			errs = append(errs, v.errorf(append(sub("events"), i), "unknown event %q (want ban, lift or expire)", e))
		}
	}
	switch {
	case n.Queue < 0 || n.Queue > maxNotifyQueue:
		fail("queue", "queue %d must be 0 (the default) to %d", n.Queue, maxNotifyQueue)
	case n.Workers < 0 || n.Workers > maxNotifyWorkers:
		fail("workers", "workers %d must be 0 (the default) to %d", n.Workers, maxNotifyWorkers)
	case n.Attempts < 0 || n.Attempts > maxNotifyAttempts:
		fail("attempts", "attempts %d must be 0 (the default) to %d", n.Attempts, maxNotifyAttempts)
	case n.Timeout < 0 || n.Timeout > maxNotifyTimeout:
		fail("timeout", "timeout %v must be 0 (the default) to %v", n.Timeout, maxNotifyTimeout)
	}
	return n, errors.Join(errs...)
}
