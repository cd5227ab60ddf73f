package guard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"net/netip"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// LoginConfig configures a Login. The zero value of each field means its
// default. Limits count failed attempts only.
type LoginConfig struct {
	// PerIPUser limits failures per address and username: a dictionary
	// attack from one address on one account. Default 5 per 15 minutes.
	PerIPUser sluice.Limit
	// PerIP limits failures per address, on any account: credential
	// stuffing from one address. Default 50 per hour.
	PerIP sluice.Limit
	// PerUser limits failures per username, from any address: a botnet
	// against one account. When it is exhausted the account is under
	// attack: only its known-good addresses, and clients that solved a
	// CAPTCHA, may still try. Default 20 per hour.
	PerUser sluice.Limit
	// Global limits failures of all logins together. When it is
	// exhausted the site is under attack: every client but known-good
	// addresses must solve a CAPTCHA. Default 1000 per minute.
	Global sluice.Limit
	// CaptchaAfter is how many recent failures of the address and
	// username, or of the username, make Attempt.Captcha true. Default 3.
	CaptchaAfter int
	// Delay is the progressive delay after the first failure, doubled for
	// each further recent failure (of the address and username, or of the
	// username from an address that is not known-good): slowing down
	// instead of locking out. Default 250 ms; negative means none.
	Delay time.Duration
	// MaxDelay caps the delay. Default 8 s.
	MaxDelay time.Duration
	// KnownGoodFor is how long an address from which an account logged in
	// stays known-good for it. Default 30 days.
	KnownGoodFor time.Duration
	// KnownGoodAddrs is how many addresses per account are known-good:
	// the last ones it logged in from, least recently used out first, so
	// that a stolen password used from many places does not make them
	// all known-good. Default DefaultKnownGoodAddrs (5); negative means
	// no cap. Each success costs about KnownGoodAddrs+7 store calls, and
	// each attempt from a known address one more.
	KnownGoodAddrs int
	// Guard judges every attempt first, as it judges every other door of
	// a service, in its one order (see Guard): the allow and deny lists
	// by address, then by the username (whose allow-list keys exempt
	// nothing, see UserActor), then the bans of every jail of the Guard,
	// of the address, its networks and the username. The Login's own
	// rules (known-good addresses, its limits, the delay) come after.
	// Default nil: a Guard of Allow, Deny and Jail.
	Guard *Guard
	// Allow, without Guard, lets attempts from its networks skip every
	// limit and the jail (the office, a monitoring probe): nothing is
	// reserved, and their failures are not counted. Its keys are not
	// consulted: an account exempt from the limits would be open to a
	// botnet. Edits take effect at once. Default none.
	Allow *List
	// Deny, without Guard, refuses, before any limit, attempts from its
	// networks and on the usernames among its keys, whatever the
	// password: a frozen account, or names no one logs in as from the
	// web. A username key is written in lower case without surrounding
	// spaces ("key:root"), as typed names are normalised before the
	// lookup. Edits take effect at once. Default none.
	Deny *List
	// Jail, if set, is fed each failure by address, so that an address
	// failing too often is banned, for Login and for whatever else checks
	// the jail (guard.Middleware); without Guard, its bans refuse
	// attempts. Default none.
	Jail *Jail
	// Secret keys the hash of usernames (HMAC-SHA-256), so that no
	// plaintext username, nor a hash reversible by trying a list of
	// names, sits in the store. Every process sharing a store must use
	// the same secret. Default nil: plain SHA-256.
	Secret []byte
	// OnAttack, if set, is told when an account or the site comes under
	// attack, at most once per account (or for the site) per the limit's
	// period. It runs on the caller's goroutine: keep it fast.
	OnAttack func(Attack)
	// Namespace prefixes the store keys. Default "sluice".
	Namespace string
	// Clock returns the time of decisions. Default nil: the store's.
	Clock func() time.Time
	// IPv6Prefix is the length of the network an IPv6 address is counted
	// and jailed under, so that one client cannot rotate through the
	// addresses of its network for fresh allowances (known-good
	// addresses stay exact). Default 0: 64; 128 counts each address.
	IPv6Prefix int
}

// An Attack is what LoginConfig.OnAttack is told.
type Attack struct {
	// Scope is "account" when one account's failures crossed PerUser,
	// "site" when all failures crossed Global.
	Scope string
	// User is the hashed username, for an account.
	User string
	// From is the address whose failure crossed the threshold.
	From netip.Addr
	// Limit is the limit crossed.
	Limit sluice.Limit
}

// A Login protects a login form as one construct: it counts failed
// attempts per address and username, per address, per username and
// globally; lets an account's known-good addresses (the last
// KnownGoodAddrs it logged in from) through while the account is under
// attack; slows clients down progressively rather than
// locking accounts; says when to demand a CAPTCHA; and bans addresses
// through a Jail. Its decisions depend only on the address and the
// (hashed) username, never on whether the account exists, so the same
// calls cost the same for real and invented names: answer every failure
// the same way and no username can be enumerated.
//
// Use: Begin before checking the password, then Fail or Succeed. The
// attempt is reserved atomically under every limit at Begin, so concurrent
// attempts cannot overrun a limit, and a success gives its units back.
//
// Create Logins with NewLogin. A Login is safe for concurrent use.
type Login struct {
	c                             LoginConfig
	guard                         *Guard
	perIPUser, perIP, user, world *sluice.Limiter
	known                         *knownGood
	told                          *flag
	settled                       *sluice.Limiter // tickets settled, once each (see Resume)
	newHash                       func() hash.Hash
}

// setDefaults gives the zero fields of c their defaults.
func (c *LoginConfig) setDefaults() {
	def := func(l *sluice.Limit, rate int, period time.Duration) {
		if *l == (sluice.Limit{}) {
			*l = sluice.Limit{Rate: rate, Period: period}
		}
	}
	def(&c.PerIPUser, 5, 15*time.Minute)
	def(&c.PerIP, 50, time.Hour)
	def(&c.PerUser, 20, time.Hour)
	def(&c.Global, 1000, time.Minute)
	if c.CaptchaAfter <= 0 {
		c.CaptchaAfter = 3
	}
	if c.Delay == 0 {
		c.Delay = 250 * time.Millisecond
	}
	if c.MaxDelay <= 0 {
		c.MaxDelay = 8 * time.Second
	}
	if c.KnownGoodFor <= 0 {
		c.KnownGoodFor = 30 * 24 * time.Hour
	}
	if c.KnownGoodAddrs == 0 {
		c.KnownGoodAddrs = DefaultKnownGoodAddrs
	}
	if c.IPv6Prefix <= 0 || c.IPv6Prefix > 128 {
		c.IPv6Prefix = DefaultIPv6Prefix
	}
}

// NewLogin returns a Login keeping its state in store.
func NewLogin(store sluice.Store, c LoginConfig) (*Login, error) {
	c.setDefaults()
	l := &Login{c: c, guard: c.Guard, newHash: sha256.New}
	if l.guard == nil {
		var jails []*Jail
		if c.Jail != nil {
			jails = []*Jail{c.Jail}
		}
		l.guard = NewGuard(GuardConfig{Allow: c.Allow, Deny: c.Deny, Jails: jails, IPv6Prefix: c.IPv6Prefix, Clock: c.Clock})
	}
	if c.Secret != nil {
		secret := append([]byte(nil), c.Secret...)
		l.newHash = func() hash.Hash { return hmac.New(sha256.New, secret) }
	}
	mk := func(action string, lim sluice.Limit) (*sluice.Limiter, error) {
		return sluice.New(store, sluice.Config{Limits: []sluice.Limit{lim}, Action: action, Namespace: c.Namespace, Clock: c.Clock})
	}
	var errs []error
	add := func(lim *sluice.Limiter, err error) *sluice.Limiter { errs = append(errs, err); return lim }
	l.perIPUser = add(mk("login-ip-user", c.PerIPUser))
	l.perIP = add(mk("login-ip", c.PerIP))
	l.user = add(mk("login-user", c.PerUser))
	l.world = add(mk("login-global", c.Global))
	var err error
	l.known, err = newKnownGood(store, c.Namespace, c.Clock, c.KnownGoodAddrs, c.KnownGoodFor)
	errs = append(errs, err)
	l.told, err = newFlag(store, c.Namespace, "login-told", c.Clock, true) // told too early would miss an attack
	errs = append(errs, err)
	l.settled, err = sluice.New(store, sluice.Config{Limits: []sluice.Limit{{Rate: 1, Period: TicketTTL}},
		Action: "login-settled", Namespace: c.Namespace, Clock: c.Clock, SafeToForget: true})
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("guard: login: %w", err)
	}
	return l, nil
}

// HashUser returns the key a Login uses for username: the unpadded
// base64url of its (keyed) SHA-256, after trimming spaces and lower-casing
// so that "Alice " and "alice" are one account. Any bytes are accepted.
func (l *Login) HashUser(username string) string {
	h := l.newHash()
	h.Write([]byte(normalizeUser(username)))
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(h.Sum(sum[:0]))
}

// normalizeUser maps the names of one account to one: "Alice " is alice.
func normalizeUser(username string) string { return strings.ToLower(strings.TrimSpace(username)) }

// A Try is one login attempt, as Begin sees it.
type Try struct {
	// IP is the client's address (see httplimit.ClientIP).
	IP netip.Addr
	// Username is what the client typed, any bytes.
	Username string
	// CaptchaSolved reports that the client solved a CAPTCHA the
	// application demanded: it lets the attempt past an account or the
	// site under attack (but not past the limits per address).
	CaptchaSolved bool
}

// An Attempt is Login's decision on a Try, and the handle to report how
// it ended.
type Attempt struct {
	// Allowed reports whether the application may check the password.
	// When false, answer as for a wrong password, or with 429 and
	// RetryAfter — the same whether the account exists or not.
	Allowed bool
	// Captcha reports that the application should demand a CAPTCHA:
	// recent failures crossed CaptchaAfter, or the account or the site is
	// under attack. When Allowed is false and Captcha true, a solved
	// CAPTCHA would let the attempt through.
	Captcha bool
	// Delay is how long to wait before answering: the progressive delay
	// for the recent failures (see Wait).
	Delay time.Duration
	// RetryAfter is, when not Allowed, how long until the attempt would
	// be allowed without a CAPTCHA.
	RetryAfter time.Duration
	// KnownGood reports that the address logged in to this account
	// before, within KnownGoodFor.
	KnownGood bool
	// Listed reports that a list decided: the Deny list refused the
	// attempt (answer as for a wrong password: it does not lapse), or the
	// Allow list let it skip the limits.
	Listed bool
	// Guard is what the guard decided of the attempt (see
	// LoginConfig.Guard): Pass when the login's own rules did.
	Guard Action
	// Reason says which rule decided, for logs; never show it to the
	// client.
	Reason string

	// Settled reports, for an attempt Resume returned, that its ticket
	// was settled before: Fail and Succeed do nothing.
	Settled bool

	l      *Login
	try    Try
	user   string // hashed
	ip     string // the address's key: IPv6 as its network
	res    []*sluice.Reservation
	ticket Ticket // once Ticket made it
}

// Begin decides whether try may proceed to the password check, and
// reserves one failure under every limit that applies: call Fail or
// Succeed on the Attempt once the password is checked. An Attempt that is
// not Allowed has reserved nothing. Errors are store failures (wrapping
// sluice.ErrStore); the Attempt is then nil.
//
// The Guard judges the attempt first (see LoginConfig.Guard): an address
// it exempts skips the limits and the jail; a denied one has RetryAfter
// zero (it does not lapse: answer it as a wrong password); a banned one
// waits out the ban.
func (l *Login) Begin(ctx context.Context, try Try) (*Attempt, error) {
	try.IP = try.IP.Unmap().WithZone("")
	a := &Attempt{l: l, try: try, user: l.HashUser(try.Username), ip: l.ipKey(try.IP)}
	if l.screen(a) {
		return a, nil
	}
	known, err := l.known.contains(ctx, a.user, try.IP)
	if err != nil {
		return a.fail(ctx, err)
	}
	a.KnownGood = known
	failures, ok, err := a.reservePerIP(ctx)
	switch {
	case err != nil:
		return a.fail(ctx, err)
	case !ok:
		return a, nil
	case !known:
		var done bool
		if failures, done, err = l.reserveShared(ctx, a, failures); done || err != nil {
			return l.pastShared(ctx, a, err)
		}
	}
	a.Allowed = true
	a.RetryAfter, a.Reason = 0, ""
	a.Captcha = a.Captcha || failures >= l.c.CaptchaAfter
	a.Delay = l.delay(failures)
	return a, nil
}

// ipKey is the key an address is counted and jailed under: an IPv6
// address's network of IPv6Prefix bits, so that one client cannot
// rotate through the addresses of its /64.
func (l *Login) ipKey(ip netip.Addr) string {
	if ip.Is6() && l.c.IPv6Prefix < 128 {
		p, _ := ip.Prefix(l.c.IPv6Prefix)
		return p.String()
	}
	return ip.String()
}

// screen asks the guard about a, and reports whether it decided it.
func (l *Login) screen(a *Attempt) bool {
	v := l.guard.Check(UserActor(a.try.IP, a.try.Username))
	a.Guard = v.Action
	switch v.Action {
	case Exempt:
		a.Allowed, a.Listed, a.Reason = true, true, "address on the allow list"
	case Refuse:
		a.Listed, a.Reason = true, "denied by list"
	case Banned:
		a.RetryAfter, a.Reason = v.Left, "banned by jail "+v.Ban.Jail
	}
	return v.Action != Pass
}

// reservePerIP reserves a's failure under the limits per address and
// username and per address, and returns the recent failures of the
// address and username; false when a limit denied (a says why).
func (a *Attempt) reservePerIP(ctx context.Context) (failures int, ok bool, err error) {
	l := a.l
	d, ok, err := a.reserve(ctx, l.perIPUser, a.user+"|"+a.ip, "too many failures for this address and username")
	if err != nil || !ok {
		return 0, ok, err
	}
	failures = d.Limit.Rate - d.Remaining - 1
	_, ok, err = a.reserve(ctx, l.perIP, a.ip, "too many failures from this address")
	return failures, ok, err
}

// reserveShared reserves a's failure under the limits per username and
// for the site, which an address that is not known-good must pass, and
// returns the most recent failures seen; done when a limit decided a
// (see pastShared).
func (l *Login) reserveShared(ctx context.Context, a *Attempt, failures int) (int, bool, error) {
	for _, x := range []struct {
		lim         *sluice.Limiter
		key, reason string
		scope, user string
		limit       sluice.Limit
		counts      bool // its failures are the account's, for the delay
	}{
		{l.user, a.user, "account under attack", "account", a.user, l.c.PerUser, true},
		{l.world, "", "site under attack", "site", "", l.c.Global, false},
	} {
		d, ok, err := a.reserve(ctx, x.lim, x.key, x.reason)
		if err != nil {
			return failures, true, err
		}
		if !ok {
			if !a.try.CaptchaSolved {
				a.Captcha = true
				l.tell(ctx, x.scope, x.user, a.try.IP, x.limit)
			}
			return failures, true, nil
		}
		if x.counts {
			failures = max(failures, d.Limit.Rate-d.Remaining-1)
		}
	}
	return failures, false, nil
}

// pastShared ends Begin when a limit shared by many addresses decided a:
// a store failure, a CAPTCHA to demand, or, for a client that solved
// one, the limits per address alone.
func (l *Login) pastShared(ctx context.Context, a *Attempt, err error) (*Attempt, error) {
	switch {
	case err != nil:
		return a.fail(ctx, err)
	case a.try.CaptchaSolved:
		// A solved CAPTCHA passes: the per-address limits still hold.
		// Reserve released what it had: take those units again.
		return l.retryPast(ctx, a.try, a)
	}
	return a, nil
}

// reserve takes one unit of key under lim for a; it reports false, and
// releases what a reserved, when lim denies.
func (a *Attempt) reserve(ctx context.Context, lim *sluice.Limiter, key, reason string) (sluice.Decision, bool, error) {
	r, err := lim.Reserve(ctx, key, 1)
	if err != nil {
		return sluice.Decision{}, false, err
	}
	if !r.Allowed {
		a.release(ctx)
		a.RetryAfter, a.Reason = r.RetryAfter, reason
		return r.Decision, false, nil
	}
	a.res = append(a.res, r)
	return r.Decision, true, nil
}

// fail ends Begin on a store failure: what a reserved is released.
func (a *Attempt) fail(ctx context.Context, err error) (*Attempt, error) {
	a.release(ctx)
	return nil, fmt.Errorf("guard: login: %w", err)
}

// retryPast is Begin for a client that solved a CAPTCHA while the account
// or the site is under attack: it reserves under the limits per address
// only.
func (l *Login) retryPast(ctx context.Context, try Try, a *Attempt) (*Attempt, error) {
	b := &Attempt{l: l, try: try, user: a.user, ip: a.ip, KnownGood: a.KnownGood, Captcha: true, Reason: a.Reason}
	if _, ok, err := b.reservePerIP(ctx); err != nil || !ok {
		if err != nil {
			return b.fail(ctx, err)
		}
		return b, nil
	}
	b.Allowed, b.Reason = true, ""
	b.Delay = l.delay(l.c.CaptchaAfter)
	return b, nil
}

// delay is the progressive delay after n recent failures.
func (l *Login) delay(n int) time.Duration {
	if n <= 0 || l.c.Delay < 0 {
		return 0
	}
	d := l.c.Delay
	for i := 1; i < n && d < l.c.MaxDelay; i++ {
		d *= 2
	}
	return min(d, l.c.MaxDelay)
}

// tell calls OnAttack once per scope and user per the limit's period.
func (l *Login) tell(ctx context.Context, scope, user string, from netip.Addr, lim sluice.Limit) {
	if l.c.OnAttack == nil {
		return
	}
	key := scope + "|" + user
	if _, told, err := l.told.get(ctx, key); err != nil || told {
		return
	}
	if err := l.told.set(ctx, key, lim.Period); err != nil {
		return
	}
	l.c.OnAttack(Attack{Scope: scope, User: user, From: from, Limit: lim})
}

// release refunds every reservation: the attempt will not happen.
func (a *Attempt) release(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	for _, r := range a.res {
		_ = r.Refund(ctx) // a failed refund leaves the unit counted: the safe side
	}
	a.res = nil
}

// Wait sleeps for the attempt's Delay, or until ctx is done.
func (a *Attempt) Wait(ctx context.Context) error {
	if a.Delay <= 0 {
		return nil
	}
	t := time.NewTimer(a.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Fail reports that the password was wrong (or the account unknown): the
// reserved failures count, and the address's failure goes to the Jail.
// It returns the ban the jail made, if any.
func (a *Attempt) Fail(ctx context.Context) (Ban, bool, error) {
	if !a.Allowed {
		return Ban{}, false, nil
	}
	for _, r := range a.res {
		_ = r.Commit()
	}
	a.res = nil
	if j := a.l.c.Jail; j != nil && !a.Listed {
		b, banned, err := j.Fail(context.WithoutCancel(ctx), a.ip, "failed logins")
		if err != nil {
			return Ban{}, false, fmt.Errorf("guard: login: %w", err)
		}
		return b, banned, nil
	}
	return Ban{}, false, nil
}

// Succeed reports that the password was right: the reserved failures are
// given back, the failures of this address on this account forgotten,
// and the address becomes known-good for the account.
func (a *Attempt) Succeed(ctx context.Context) error {
	if !a.Allowed {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	a.release(ctx)
	l := a.l
	return errors.Join(
		l.perIPUser.Reset(ctx, a.user+"|"+a.ip),
		l.known.add(ctx, a.user, a.try.IP),
	)
}
