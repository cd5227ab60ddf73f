package config

import (
	"errors"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/suggest"
)

// A Login is a login rule: package guard's Login construct, served by
// /v1/login/begin, /v1/login/fail, /v1/login/succeed and forward-auth's
// ?login=NAME. It counts failed attempts per address and username, per
// address, per username and for the whole site; lets an account's
// known-good addresses in while it is under attack; slows clients down
// progressively; and feeds a jail. Zero fields take the defaults of
// guard.LoginConfig.
type Login struct {
	// Name identifies the login: 1 to 64 letters, digits, '_', '-', '.'.
	Name string
	// PerIPUser, PerIP, PerUser and Global limit failures per address and
	// username (default 5/15m), per address (50/h), per username (20/h:
	// beyond it, the account is under attack) and for the site
	// (1000/min).
	PerIPUser, PerIP, PerUser, Global sluice.Limit
	// CaptchaAfter is how many recent failures make an attempt ask for a
	// CAPTCHA. Default 3.
	CaptchaAfter int
	// Delay is the progressive delay after the first failure, doubled per
	// further failure, up to MaxDelay (default 250ms and 8s); negative
	// means none.
	Delay, MaxDelay time.Duration
	// MaxHold is the longest forward-auth holds a request for its delay
	// before answering; a longer delay is told in the response header
	// X-Sluice-Delay instead. Default 2s; negative means never hold.
	MaxHold time.Duration
	// KnownGoodFor is how long an address an account logged in from
	// stays known-good for it (default 30 days); KnownGoodAddrs how many
	// addresses per account are (default 5).
	KnownGoodFor   time.Duration
	KnownGoodAddrs int
	// Jail names a jail of the guard section that the login's failures
	// feed, by address. Default none.
	Jail string
	// Secret keys the hash of usernames (secret, secret_env or
	// secret_file); every process sharing a store must use the same.
	// Default none: plain SHA-256.
	Secret string
	// IPv6Prefix is the network an IPv6 address is counted under.
	// Default 64.
	IPv6Prefix int
}

// DefaultMaxHold is Login.MaxHold's default.
const DefaultMaxHold = 2 * time.Second

type fileLogin struct {
	Name           string        `yaml:"name"`
	PerIPUser      string        `yaml:"per_ip_user"`
	PerIP          string        `yaml:"per_ip"`
	PerUser        string        `yaml:"per_user"`
	Global         string        `yaml:"global"`
	CaptchaAfter   int           `yaml:"captcha_after"`
	Delay          time.Duration `yaml:"delay"`
	MaxDelay       time.Duration `yaml:"max_delay"`
	MaxHold        time.Duration `yaml:"max_hold"`
	KnownGoodFor   time.Duration `yaml:"known_good_for"`
	KnownGoodAddrs int           `yaml:"known_good_addrs"`
	Jail           string        `yaml:"jail"`
	Secret         string        `yaml:"secret"`
	SecretEnv      string        `yaml:"secret_env"`
	SecretFile     string        `yaml:"secret_file"`
	IPv6Prefix     int           `yaml:"ipv6_prefix"`
}

// jails returns the names of the jails the logins feed.
func loginJails(ls []fileLogin) []string {
	var out []string
	for _, l := range ls {
		if l.Jail != "" {
			out = append(out, l.Jail)
		}
	}
	return out
}

// logins validates the logins section against the guard's jails.
func logins(v *validator, fs []fileLogin, g Guard) ([]Login, error) {
	var out []Login
	var errs []error
	seen := map[string]int{}
	for i, f := range fs {
		l, err := f.login(v, at("logins", i), g)
		if prev, dup := seen[l.Name]; dup {
			err = errors.Join(err, v.errorf(at("logins", i, "name"), "login %q is already defined at line %d", l.Name, v.line("logins", prev, "name")))
		}
		seen[l.Name] = i
		errs = append(errs, err)
		out = append(out, l)
	}
	return out, errors.Join(errs...)
}

// login validates one login, at path.
func (f *fileLogin) login(v *validator, path []any, g Guard) (Login, error) {
	l := Login{Name: f.Name, CaptchaAfter: f.CaptchaAfter, Delay: f.Delay, MaxDelay: f.MaxDelay, MaxHold: f.MaxHold,
		KnownGoodFor: f.KnownGoodFor, KnownGoodAddrs: f.KnownGoodAddrs, Jail: f.Jail, IPv6Prefix: f.IPv6Prefix}
	sub := func(p ...any) []any { return append(append([]any(nil), path...), p...) }
	var errs []error
	fail := func(path []any, format string, args ...any) { errs = append(errs, v.errorf(path, format, args...)) }
	if !ruleName.MatchString(l.Name) {
		fail(sub("name"), "login name %q must be 1 to 64 letters, digits, '_', '-' or '.'", l.Name)
	}
	for _, x := range []struct {
		field string
		text  string
		dst   *sluice.Limit
	}{{"per_ip_user", f.PerIPUser, &l.PerIPUser}, {"per_ip", f.PerIP, &l.PerIP}, {"per_user", f.PerUser, &l.PerUser}, {"global", f.Global, &l.Global}} {
		if x.text == "" {
			continue
		}
		lim, err := sluice.ParseLimit(x.text)
		if err != nil {
			fail(sub(x.field), "%w", err)
		}
		*x.dst = lim
	}
	for _, x := range []struct {
		field string
		neg   bool
	}{{"captcha_after", l.CaptchaAfter < 0}, {"max_delay", l.MaxDelay < 0}, {"known_good_for", l.KnownGoodFor < 0}} {
		if x.neg {
			fail(sub(x.field), "%s must not be negative (0: the default)", x.field)
		}
	}
	if l.KnownGoodFor > sluice.MaxPeriod {
		fail(sub("known_good_for"), "known_good_for %v is more than %v", l.KnownGoodFor, sluice.MaxPeriod)
	}
	if l.IPv6Prefix < 0 || l.IPv6Prefix > 128 {
		fail(sub("ipv6_prefix"), "ipv6_prefix %d must be 1 to 128", l.IPv6Prefix)
	}
	if l.Jail != "" && !hasJail(g, l.Jail) {
		var jails []string
		for _, j := range g.Jails {
			jails = append(jails, j.Name)
		}
		fail(sub("jail"), "no jail named %q in guard.jails%s", l.Jail, suggest.DidYouMean(l.Jail, jails))
	}
	if l.MaxHold == 0 {
		l.MaxHold = DefaultMaxHold
	}
	var err error
	l.Secret, err = secret(v, path, f.Secret, f.SecretEnv, f.SecretFile, "secret")
	return l, errors.Join(append(errs, err)...)
}

func hasJail(g Guard, name string) bool {
	for _, j := range g.Jails {
		if j.Name == name {
			return true
		}
	}
	return false
}
