package httplimit

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/httpstatus"
	"github.com/sluicehq/sluice/internal/logthrottle"
	"github.com/sluicehq/sluice/internal/ratelimitheader"
)

// Mode says what a rule does with a request it denies.
type Mode uint8

const (
	// Enforce answers a denied request with 429 Too Many Requests (or the
	// Config's Deny handler). The default.
	Enforce Mode = iota
	// DryRun counts and logs as Enforce would, but lets denied requests
	// through: a new rule's "warning mode", to see whom it would hit.
	DryRun
	// Shadow lets denied requests through with whatever the handler
	// answers, but marks them (see Shadowed) so that the handler can skip
	// their side effects — sending the invitation, posting the comment —
	// without telling a spammer it was caught.
	Shadow
)

var modeNames = [...]string{"enforce", "dry-run", "shadow"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", m)
}

// Fields chooses the rate-limit header fields written on responses.
type Fields uint8

const (
	// FieldsDraft writes the IETF RateLimit and RateLimit-Policy fields
	// (draft-ietf-httpapi-ratelimit-headers-11, May 2026; the form has not changed since -08). The default.
	FieldsDraft Fields = iota
	// FieldsDraftAndLegacy also writes X-RateLimit-Limit,
	// X-RateLimit-Remaining and X-RateLimit-Reset (seconds from now).
	FieldsDraftAndLegacy
	// FieldsNone writes neither; Retry-After is still sent on 429.
	FieldsNone
)

// A Decider decides one rule's takes for actor keys: a *sluice.Limiter
// (in process, or on a store shared by the fleet), or a rule of the
// sluice serve service (client.Rule). Limits is the rule's policy, for
// the RateLimit-Policy field: at least one limit.
type Decider interface {
	Allow(ctx context.Context, key string) (sluice.Decision, error)
	Reset(ctx context.Context, key string) error
	Limits() []sluice.Limit
}

// A Reserver is a Decider whose takes can be given back: Rule.Count
// needs one, and the takes of a request that another rule denies are
// given back only when their Decider is one. *sluice.Limiter is a
// Reserver.
type Reserver interface {
	Reserve(ctx context.Context, key string, n int) (*sluice.Reservation, error)
}

var _ Reserver = (*sluice.Limiter)(nil)

// A Rule limits the requests it matches, per actor key, with a Limiter
// or another Decider.
type Rule struct {
	// Name identifies the rule in the RateLimit fields, problem details
	// and logs; printable ASCII. Default "default" for the first rule and
	// "rule2", "rule3"… for the others. Names must be distinct.
	Name string
	// Limiter holds the policy and the store. Required unless Decider
	// is set.
	Limiter *sluice.Limiter
	// Decider decides instead of Limiter, such as a rule of the shared
	// sluice serve service (client.Rule), so that an application moves
	// from in-process limits to the service by configuration. Set one of
	// Limiter and Decider. A Decider that is not a Reserver (the
	// service's API has no refund) cannot Count; and its take of a
	// request that another rule denies stays counted, as a failed refund
	// does: the safe side. Default nil.
	Decider Decider
	// Key derives the actor from the request. Default the client's
	// address, as Config.ClientIP finds it.
	Key Keyer
	// Match selects the requests the rule counts (Django
	// ratelimit's should_ratelimit). Default nil: every request.
	Match func(*http.Request) bool
	// Mode is what the rule does with a request it denies. Default
	// Enforce.
	Mode Mode
	// Count, when set, counts only requests whose response status it
	// accepts, such as 401 for failed logins (see Status): each request
	// reserves one unit before the handler runs (so concurrent requests
	// cannot overrun the limit), and the unit is kept if Count accepts the
	// status and given back otherwise. Default nil: every request counts.
	Count func(status int) bool
	// Reset, when set, forgets the actor's state under this rule when it
	// accepts the response status (clear the counters after a
	// successful login). Default nil: never.
	Reset func(status int) bool
	// Fields chooses the form of the rate-limit fields of a response
	// whose fields describe this rule's decision (the binding one), for
	// the clients of this rule's endpoints that read an older form.
	// Default RuleFieldsDefault: Config.Fields.
	Fields RuleFields
}

// RuleFields is the form of the rate-limit fields a rule's clients read
// (see Rule.Fields).
type RuleFields uint8

const (
	// RuleFieldsDefault writes the middleware's Config.Fields.
	RuleFieldsDefault RuleFields = iota
	// RuleFieldsLegacy adds X-RateLimit-Limit, -Remaining and -Reset to
	// the draft's fields (as FieldsDraftAndLegacy does for every rule).
	RuleFieldsLegacy
	// RuleFieldsDraft07 writes draft-ietf-httpapi-ratelimit-headers-07's
	// fields instead of the current draft's, for the binding limit only:
	// `RateLimit-Policy: 10;w=60` and `RateLimit: limit=10, remaining=9,
	// reset=6`. Draft -08 reused both names with another syntax, so the
	// two forms cannot be written together.
	RuleFieldsDraft07
	// RuleFieldsDraft06 writes draft -06's fields instead, for the
	// binding limit: RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset
	// (seconds) and `RateLimit-Policy: 10;w=60`.
	RuleFieldsDraft06
)

// Config configures a Middleware. The zero value of every field but Rules
// means its default.
type Config struct {
	// Rules are decided together, in order, for every request: the
	// request is let through only if every Enforce rule that matches
	// allows it, and a denied request consumes nothing under the other
	// rules (their takes are refunded). At least one.
	Rules []Rule
	// ClientIP finds client addresses for the default keys. Default: the
	// connection's address, with no trusted proxy.
	ClientIP *ClientIP
	// Deny answers denied requests, after Retry-After and the rate-limit
	// fields are set; it can read the Outcome from the request. Default
	// ProblemHandler: 429 with an application/problem+json body.
	Deny http.Handler
	// Failure is what happens when the store fails: sluice.FailOpen
	// lets the request through unlimited and logs the failure;
	// FailClosed answers 503 Service Unavailable with Retry-After.
	// Default FailOpen: an outage of the limiter's store must not become
	// an outage of the site. FailLocal is refused: to keep limiting on a
	// local store meanwhile, give the Limiter a store/fallback Store.
	Failure sluice.FailurePolicy
	// Fields chooses the rate-limit header fields. Default FieldsDraft.
	Fields Fields
	// Logger receives denials (Info), dry-run and shadow denials (Info)
	// and store failures (Warn, at most one line a second). Denials are
	// throttled per message and policy: a burst of 10 lines, then one a
	// second, the next line passed counting those left out
	// ("suppressed"); metrics, not logs, should count every denial.
	// Default slog.Default().
	Logger *slog.Logger
	// AttachOutcome attaches the Outcome to every request the handler
	// gets, for handlers that read the binding decision of an allowed
	// request with OutcomeOf. Default false: only requests that a Shadow
	// or DryRun rule denied carry it (so Shadowed works), and requests
	// given to Deny; other requests reach the handler as they came, which
	// spares the request copy a context costs.
	AttachOutcome bool
}

// A Middleware limits the requests that pass through it, by the rules of
// its Config. Create one with New and wrap handlers with Handler. It is
// safe for concurrent use.
type Middleware struct {
	rules    []rule
	deny     http.Handler
	failure  sluice.FailurePolicy
	fields   Fields
	log      *slog.Logger
	reserves bool // some rule needs reservations: several rules, or Count
	attach   bool // Config.AttachOutcome
	custom   bool // Deny is the Config's, not the problem writer
	// policyAll is the RateLimit-Policy value when every Enforce rule
	// matched the request, as most requests do; enforcing counts them.
	policyAll string
	enforcing int

	lastErrLog atomic.Int64 // Unix ns of the last store-failure line
	suppressed atomic.Int64 // store failures not logged since
}

type rule struct {
	Rule
	limits      []sluice.Limit
	names       []string // policy name of each limit
	tails       [][]byte // problem details' tail naming each limit
	policyField string   // this rule's items of RateLimit-Policy
	appender    KeyAppender
	dec         Decider  // Limiter, or the Rule's Decider
	reserver    Reserver // dec, if it is one
}

// New returns a Middleware for c, or an error wrapping
// sluice.ErrInvalidRequest if a rule lacks its Limiter (or Decider), has
// both, counts by status with a Decider that cannot give a take back,
// if two rules share a name, or if Failure is not FailOpen or
// FailClosed.
func New(c Config) (*Middleware, error) {
	if len(c.Rules) == 0 {
		return nil, fmt.Errorf("%w: httplimit: no rules", sluice.ErrInvalidRequest)
	}
	if err := c.Failure.CheckOpenClosed(); err != nil {
		return nil, fmt.Errorf("httplimit: %w", err)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	m := &Middleware{deny: c.Deny, failure: c.Failure, fields: c.Fields, attach: c.AttachOutcome, custom: c.Deny != nil}
	// A flood of denials writes a bounded log, as the service's does.
	m.log = slog.New(logthrottle.New(c.Logger.Handler(), logthrottle.Config{RuleKeys: []string{"policy"}}))
	seen := map[string]bool{}
	for i, r := range c.Rules {
		ru, err := newRule(i, r, c.ClientIP, seen)
		if err != nil {
			return nil, err
		}
		m.rules = append(m.rules, ru)
		if r.Mode == Enforce {
			if m.enforcing > 0 {
				m.policyAll += ", "
			}
			m.policyAll += ru.policyField
			m.enforcing++
		}
		m.reserves = m.reserves || r.Count != nil || r.Reset != nil
	}
	m.reserves = m.reserves || len(m.rules) > 1
	return m, nil
}

// newRule checks rule i of a Config, names it when it has no name (seen
// holds the names taken), gives it the client's address as its key by
// default (clientIP, else a ClientIP of its own), and compiles it.
func newRule(i int, r Rule, clientIP *ClientIP, seen map[string]bool) (rule, error) {
	dec, err := decider(i, r)
	if err != nil {
		return rule{}, err
	}
	if r.Name == "" {
		r.Name = "default"
		if i > 0 {
			r.Name = fmt.Sprintf("rule%d", i+1)
		}
	}
	if !validName(r.Name) || seen[r.Name] {
		return rule{}, fmt.Errorf("%w: httplimit: rule name %q is not printable ASCII or not unique", sluice.ErrInvalidRequest, r.Name)
	}
	if r.Fields > RuleFieldsDraft06 {
		return rule{}, fmt.Errorf("%w: httplimit: rule %q: unknown Fields %d", sluice.ErrInvalidRequest, r.Name, r.Fields)
	}
	seen[r.Name] = true
	if r.Key == nil {
		r.Key = clientIP
		if clientIP == nil {
			r.Key = &ClientIP{}
		}
	}
	ru := rule{Rule: r, limits: dec.Limits(), dec: dec}
	ru.reserver, _ = dec.(Reserver)
	if len(ru.limits) == 0 {
		return rule{}, fmt.Errorf("%w: httplimit: rule %q: its Decider has no limits", sluice.ErrInvalidRequest, r.Name)
	}
	if r.Count != nil && ru.reserver == nil {
		return rule{}, fmt.Errorf("%w: httplimit: rule %q counts by status, which needs a Decider that can give a take back (a Reserver, such as *sluice.Limiter); %T cannot", sluice.ErrInvalidRequest, r.Name, dec)
	}
	ru.names, ru.policyField = ratelimitheader.Policy(r.Name, ru.limits)
	for _, name := range ru.names {
		ru.tails = append(ru.tails, problemTail(name))
	}
	ru.appender, _ = r.Key.(KeyAppender)
	return ru, nil
}

// decider returns the Decider of rule i: its Limiter or its Decider,
// exactly one of which must be set.
func decider(i int, r Rule) (Decider, error) {
	switch {
	case r.Limiter != nil && r.Decider != nil:
		return nil, fmt.Errorf("%w: httplimit: rule %d has both a Limiter and a Decider", sluice.ErrInvalidRequest, i)
	case r.Limiter != nil:
		return r.Limiter, nil
	case r.Decider != nil:
		return r.Decider, nil
	}
	return nil, fmt.Errorf("%w: httplimit: rule %d has no Limiter", sluice.ErrInvalidRequest, i)
}

// Handler wraps next: every request passes the rules before next sees it.
// Its method value m.Handler is a func(http.Handler) http.Handler, as
// routers expect of middleware.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

// applied is one rule's decision for one request.
type applied struct {
	rule *rule
	key  string
	d    sluice.Decision
	res  *sluice.Reservation // nil when taken with Allow
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if exempt(r.Context()) {
		next.ServeHTTP(w, r)
		return
	}
	st := newReqState()
	var buf [4]applied
	var out Outcome
	as, deny, ok := m.decide(w, r, st, buf[:0], &out)
	switch {
	case !ok: // the store failed under FailClosed: answered
	case deny >= 0:
		m.denied(w, r, st, as, deny, &out)
	default:
		m.pass(w, r, next, st, as, &out)
	}
}

// decide applies every rule that matches r, until one that enforces
// denies it (deny, its index in as), and sets out's dry-run and shadow
// marks. It reports false when a store failure under FailClosed refused
// r, which it then answered.
func (m *Middleware) decide(w http.ResponseWriter, r *http.Request, st *reqState, as []applied, out *Outcome) (_ []applied, deny int, ok bool) {
	ctx := r.Context()
	for i := range m.rules {
		ru := &m.rules[i]
		if ru.Match != nil && !ru.Match(r) {
			continue
		}
		a, err := m.take(ctx, ru, st.key(ru, r)) // "" is the shared key of requests without one
		if err != nil {
			m.storeFailed(ctx, ru, err)
			if m.failure == sluice.FailClosed {
				m.refund(ctx, as)
				*out = Outcome{Policy: ru.Name, StoreFailed: true}
				st.set(w.Header(), hdrRetryAfter, "1")
				m.answerDenied(w, r, st, out)
				return as, -1, false
			}
			continue
		}
		as = append(as, a)
		if a.d.Allowed {
			continue
		}
		if t, ok := ru.Key.(Tripper); ok {
			t.Trip(r, a.key)
		}
		m.logDenial(r, ru, a.key, a.d)
		switch ru.Mode {
		case DryRun:
			out.DryRun = true
		case Shadow:
			out.Shadowed = true
		default:
			return as, len(as) - 1, true
		}
	}
	return as, -1, true
}

// take takes one unit of key under ru: reserved, when some rule counts
// by response status, else allowed outright.
func (m *Middleware) take(ctx context.Context, ru *rule, key string) (applied, error) {
	a := applied{rule: ru, key: key}
	var err error
	switch {
	case ru.Limiter != nil && !m.reserves:
		a.d, err = ru.Limiter.Allow(ctx, key)
		return a, err
	case ru.reserver == nil || !m.reserves:
		a.d, err = ru.dec.Allow(ctx, key)
		return a, err
	}
	res, err := ru.reserver.Reserve(ctx, key, 1)
	if err != nil {
		return a, err
	}
	a.res, a.d = res, res.Decision
	return a, nil
}

// denied answers a request that rule as[deny] denied, giving back what
// the others took.
func (m *Middleware) denied(w http.ResponseWriter, r *http.Request, st *reqState, as []applied, deny int, out *Outcome) {
	d := as[deny]
	m.refund(r.Context(), as)
	out.Denied = true
	out.Policy = d.rule.nameOf(d.d.Limit)
	out.Decision = d.d
	m.writeFields(w.Header(), st, as, deny)
	if m.custom {
		m.deny.ServeHTTP(w, withOutcome(r, out))
		return
	}
	var tail []byte
	if i := d.rule.indexOf(d.d.Limit); i >= 0 {
		tail = d.rule.tails[i]
	}
	writeProblem(w, st, out, tail)
}

// pass serves an allowed request with next, then settles reservations by
// the response's status.
func (m *Middleware) pass(w http.ResponseWriter, r *http.Request, next http.Handler, st *reqState, as []applied, out *Outcome) {
	if bind := binding(as); bind >= 0 {
		out.Policy = as[bind].rule.nameOf(as[bind].d.Limit)
		out.Decision = as[bind].d
	}
	m.writeFields(w.Header(), st, as, -1)
	if m.attach || out.Shadowed || out.DryRun {
		r = withOutcome(r, out)
	}
	if !m.reserves {
		next.ServeHTTP(w, r)
		return
	}
	st.sw = httpstatus.Writer{ResponseWriter: w}
	next.ServeHTTP(st.sw.Wrap(), r) // the writer's Hijacker, Flusher, ReaderFrom and Pusher kept
	m.settle(context.WithoutCancel(r.Context()), as, st.sw.Code())
}

// answerDenied answers a request the middleware refuses: with the
// Config's Deny handler, given the Outcome in the request's context, or
// by writing the problem details directly.
func (m *Middleware) answerDenied(w http.ResponseWriter, r *http.Request, st *reqState, out *Outcome) {
	if m.custom {
		m.deny.ServeHTTP(w, withOutcome(r, out))
		return
	}
	writeProblem(w, st, out, nil)
}

// key derives the request's key under ru, appending it to st.b when the
// Keyer can, so that a key costs no allocation of its own. It returns ""
// when no key can be derived.
func (st *reqState) key(ru *rule, r *http.Request) string {
	if ru.appender == nil {
		key, ok := ru.Key.Key(r)
		if !ok {
			return ""
		}
		return key
	}
	start := len(st.b)
	b, ok := ru.appender.AppendKey(st.b, r)
	if !ok {
		return ""
	}
	st.b = b
	return st.str(start)
}

// binding returns the index of the Enforce rule whose decision describes
// the request best (see sluice.Decision.Binds), or -1.
func binding(as []applied) int {
	b := -1
	for i, a := range as {
		if a.rule.Mode == Enforce && (b < 0 || a.d.Binds(as[b].d)) {
			b = i
		}
	}
	return b
}

// refund gives back every allowed reservation of a request that will not
// run, so that a denial under one rule consumes nothing under the others.
// A failed refund leaves the unit counted: the safe side.
func (m *Middleware) refund(ctx context.Context, as []applied) {
	if !m.reserves {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for _, a := range as {
		if a.res != nil && a.d.Allowed {
			if err := a.res.Refund(ctx); err != nil {
				m.storeFailed(ctx, a.rule, err)
			}
		}
	}
}

// settle keeps or gives back each reservation once the handler has
// answered with status, and resets actors whose Reset accepts it. ctx is
// detached from the request, so a client that hangs up cannot stop it.
func (m *Middleware) settle(ctx context.Context, as []applied, status int) {
	for _, a := range as {
		if !a.d.Allowed {
			continue
		}
		ru := a.rule
		var err error
		switch {
		case ru.Reset != nil && ru.Reset(status):
			if a.res != nil {
				_ = a.res.Commit()
			}
			err = ru.dec.Reset(ctx, a.key)
		case a.res == nil: // taken outright: nothing to settle
		case ru.Count != nil && !ru.Count(status):
			err = a.res.Refund(ctx)
		default:
			_ = a.res.Commit()
		}
		if err != nil {
			m.storeFailed(ctx, ru, err)
		}
	}
}

func (ru *rule) nameOf(l sluice.Limit) string {
	if i := ru.indexOf(l); i >= 0 {
		return ru.names[i]
	}
	return ru.Name
}

// indexOf returns the index of l among the rule's limits, or -1.
func (ru *rule) indexOf(l sluice.Limit) int {
	if len(ru.limits) == 1 {
		return 0
	}
	id := l.StateID()
	for i, x := range ru.limits {
		if x.StateID() == id {
			return i
		}
	}
	return -1
}

func (m *Middleware) logDenial(r *http.Request, ru *rule, key string, d sluice.Decision) {
	if !m.log.Enabled(r.Context(), slog.LevelInfo) {
		return
	}
	msg := "httplimit: denied"
	switch ru.Mode {
	case DryRun:
		msg = "httplimit: would deny (dry run)"
	case Shadow:
		msg = "httplimit: shadow-denied"
	}
	m.log.LogAttrs(r.Context(), slog.LevelInfo, msg,
		slog.String("policy", ru.nameOf(d.Limit)),
		slog.String("mode", ru.Mode.String()),
		slog.String("key", key),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("remote", r.RemoteAddr),
		slog.String("limit", d.Limit.String()),
		slog.Duration("retry_after", d.RetryAfter),
	)
}

// storeFailed logs a store failure, at most one line a second: during
// an outage every request fails, and the log must not drown.
func (m *Middleware) storeFailed(ctx context.Context, ru *rule, err error) {
	now := time.Now().UnixNano()
	last := m.lastErrLog.Load()
	if now-last < int64(time.Second) || !m.lastErrLog.CompareAndSwap(last, now) {
		m.suppressed.Add(1)
		return
	}
	policy := "failing open: request let through"
	if m.failure == sluice.FailClosed {
		policy = "failing closed: request refused with 503"
	}
	m.log.LogAttrs(ctx, slog.LevelWarn, "httplimit: store failed; "+policy,
		slog.String("policy", ru.Name),
		slog.Any("error", err),
		slog.Int64("suppressed", m.suppressed.Swap(0)),
	)
}
