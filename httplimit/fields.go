package httplimit

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ratelimitheader"
)

// Canonical header names, so the middleware can index http.Header
// directly.
var (
	hdrRateLimit       = http.CanonicalHeaderKey("RateLimit")
	hdrRateLimitPolicy = http.CanonicalHeaderKey("RateLimit-Policy")
	hdrRetryAfter      = http.CanonicalHeaderKey("Retry-After")
	hdrLegacyLimit     = http.CanonicalHeaderKey("X-RateLimit-Limit")
	hdrLegacyRemaining = http.CanonicalHeaderKey("X-RateLimit-Remaining")
	hdrLegacyReset     = http.CanonicalHeaderKey("X-RateLimit-Reset")
	hdrDraftLimit      = http.CanonicalHeaderKey("RateLimit-Limit")
	hdrDraftRemaining  = http.CanonicalHeaderKey("RateLimit-Remaining")
	hdrDraftReset      = http.CanonicalHeaderKey("RateLimit-Reset")
)

// ProblemType is the problem type of a 429 answer: the quota-exceeded type
// the RateLimit fields draft registers.
const ProblemType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// validName reports whether s can be written as a structured-field string
// without escapes: printable ASCII but '"' and '\'.
func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return s != ""
}

// writeFields sets Retry-After when deny ≥ 0, and the rate-limit fields of
// the Enforce rules in as, building every value in st so that a request
// costs no allocation here.
func (m *Middleware) writeFields(h http.Header, st *reqState, as []applied, deny int) {
	if deny >= 0 {
		start := len(st.b)
		st.b = strconv.AppendInt(st.b, max(ratelimitheader.CeilSeconds(as[deny].d.RetryAfter), 1), 10)
		st.set(h, hdrRetryAfter, st.str(start))
	}
	bind := deny
	if bind < 0 {
		bind = binding(as)
	}
	if m.fields == FieldsNone || bind < 0 {
		return
	}
	if f := as[bind].rule.Fields; f == RuleFieldsDraft07 || f == RuleFieldsDraft06 {
		writeOlderDraft(h, st, f, as[bind].d)
		return
	}
	enforced := 0
	for _, a := range as {
		if a.rule.Mode == Enforce {
			enforced++
		}
	}
	policy := m.policyAll
	if enforced != m.enforcing { // some rule did not match: list the others
		start := len(st.b)
		for _, a := range as {
			if a.rule.Mode == Enforce {
				if len(st.b) > start {
					st.b = append(st.b, ", "...)
				}
				st.b = append(st.b, a.rule.policyField...)
			}
		}
		policy = st.str(start)
	}
	st.set(h, hdrRateLimitPolicy, policy)
	start := len(st.b)
	for _, a := range as {
		if a.rule.Mode == Enforce {
			if len(st.b) > start {
				st.b = append(st.b, ", "...)
			}
			st.b = ratelimitheader.AppendItem(st.b, a.rule.nameOf(a.d.Limit), a.d)
		}
	}
	st.set(h, hdrRateLimit, st.str(start))
	if m.fields == FieldsDraftAndLegacy || as[bind].rule.Fields == RuleFieldsLegacy {
		writeLegacy(h, st, as[bind].d)
	}
}

// writeOlderDraft sets the fields of draft -07 or -06 (f) of d, the
// binding decision.
func writeOlderDraft(h http.Header, st *reqState, f RuleFields, d sluice.Decision) {
	limit, remaining, reset := int64(d.Limit.Rate), int64(max(d.Remaining, 0)), ratelimitheader.CeilSeconds(d.ResetAfter)
	start := len(st.b)
	st.b = strconv.AppendInt(st.b, limit, 10)
	st.b = append(st.b, ";w="...)
	st.b = strconv.AppendInt(st.b, ratelimitheader.CeilSeconds(d.Limit.Period), 10)
	st.set(h, hdrRateLimitPolicy, st.str(start))
	if f == RuleFieldsDraft07 {
		start = len(st.b)
		st.b = append(st.b, "limit="...)
		st.b = strconv.AppendInt(st.b, limit, 10)
		st.b = append(st.b, ", remaining="...)
		st.b = strconv.AppendInt(st.b, remaining, 10)
		st.b = append(st.b, ", reset="...)
		st.b = strconv.AppendInt(st.b, reset, 10)
		st.set(h, hdrRateLimit, st.str(start))
		return
	}
	for _, f := range [...]struct {
		key string
		n   int64
	}{{hdrDraftLimit, limit}, {hdrDraftRemaining, remaining}, {hdrDraftReset, reset}} {
		start := len(st.b)
		st.b = strconv.AppendInt(st.b, f.n, 10)
		st.set(h, f.key, st.str(start))
	}
}

// writeLegacy sets the X-RateLimit-* fields of d, the binding decision.
func writeLegacy(h http.Header, st *reqState, d sluice.Decision) {
	for _, f := range [...]struct {
		key string
		n   int64
	}{{hdrLegacyLimit, int64(d.Limit.Rate)}, {hdrLegacyRemaining, int64(max(d.Remaining, 0))}, {hdrLegacyReset, ratelimitheader.CeilSeconds(d.ResetAfter)}} {
		start := len(st.b)
		st.b = strconv.AppendInt(st.b, f.n, 10)
		st.set(h, f.key, st.str(start))
	}
}

// A Problem is the RFC 9457 problem details body ProblemHandler writes.
type Problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail,omitempty"`
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
}

// WriteProblem answers with p, an RFC 9457 problem details document, as
// application/problem+json, with p.Status, Cache-Control: no-store and,
// when retryAfter is positive, Retry-After in whole seconds (rounded up,
// at least 1). It is how every surface of sluice that refuses a request
// answers: the guard's 403s, forward-auth's denials and refusals, the
// HTTP APIs' errors; the middleware writes its 429s in the same form
// without allocating (ProblemHandler). A zero Type is "about:blank", a
// zero Title the status text.
func WriteProblem(w http.ResponseWriter, p Problem, retryAfter time.Duration) {
	if p.Type == "" {
		p.Type = "about:blank"
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(max(ratelimitheader.CeilSeconds(retryAfter), 1), 10))
	}
	body, _ := json.Marshal(p) // strings and numbers: always marshals
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// ProblemHandler answers a denied request with 429 Too Many Requests and
// an application/problem+json body (RFC 9457) of type ProblemType naming
// the violated policy, or, when the store failed and the middleware fails
// closed, with 503 Service Unavailable. It is what a Middleware answers
// when its Config has no Deny handler; use it to compose one.
func ProblemHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o, _ := OutcomeOf(r)
		writeProblem(w, newReqState(), &o, nil)
	})
}

// The problem details, in parts: the body of a 429 is problemHead, the
// seconds to wait, and a tail naming the policy (built once per policy);
// that of a 503 is fixed. Writers must not modify what they are given
// (io.Writer), so the parts are shared.
var (
	problemHead = []byte(`{"type":"` + ProblemType + `","title":"Too Many Requests","status":429,"detail":"Too many requests; retry after `)
	problem503  = []byte(`{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"The rate limiter is unavailable; try again shortly."}`)
	problem503n = strconv.Itoa(len(problem503))
)

// problemTail returns the end of a 429's problem details naming policy.
// Policy names are printable ASCII without quotes or backslashes (see
// validName), so they need no JSON escapes.
func problemTail(policy string) []byte {
	if policy == "" {
		return []byte(` s."}`)
	}
	return []byte(` s.","violated-policies":["` + policy + `"]}`)
}

// writeProblem writes the problem details of o, with tail (nil: built
// from o.Policy) and the header values built in st.
func writeProblem(w http.ResponseWriter, st *reqState, o *Outcome, tail []byte) {
	h := w.Header()
	st.set(h, "Content-Type", "application/problem+json")
	st.set(h, "Cache-Control", "no-store")
	if o.StoreFailed {
		st.set(h, "Content-Length", problem503n)
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write(problem503)
		return
	}
	if tail == nil {
		tail = problemTail(o.Policy)
	}
	start := len(st.b)
	st.b = strconv.AppendInt(st.b, max(ratelimitheader.CeilSeconds(o.Decision.RetryAfter), 1), 10)
	secs := st.b[start:]
	start = len(st.b)
	st.b = strconv.AppendInt(st.b, int64(len(problemHead)+len(secs)+len(tail)), 10)
	st.set(h, "Content-Length", st.str(start))
	w.WriteHeader(http.StatusTooManyRequests)
	for _, part := range [...][]byte{problemHead, secs, tail} {
		if _, err := w.Write(part); err != nil {
			return
		}
	}
}

// Methods matches requests with one of the given methods, for Rule.Match.
func Methods(methods ...string) func(*http.Request) bool {
	methods = append([]string(nil), methods...)
	return func(r *http.Request) bool {
		for _, m := range methods {
			if r.Method == m {
				return true
			}
		}
		return false
	}
}

// PathPrefix matches requests whose URL path starts with prefix, for
// Rule.Match.
func PathPrefix(prefix string) func(*http.Request) bool {
	return func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, prefix) }
}

// Status accepts the given response statuses, for Rule.Count and
// Rule.Reset: Status(401) counts failed logins.
func Status(codes ...int) func(int) bool {
	codes = append([]int(nil), codes...)
	return func(status int) bool {
		for _, c := range codes {
			if status == c {
				return true
			}
		}
		return false
	}
}

// Successful accepts 2xx and 3xx statuses (a login that redirects), for
// Rule.Reset.
func Successful(status int) bool { return status >= 200 && status < 400 }
