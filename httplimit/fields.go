package httplimit

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
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

// policyItems names each limit of a rule and returns the rule's items of
// the RateLimit-Policy field: `"name";q=Rate;w=seconds`. A rule of one
// limit names it after the rule; a rule of several appends the period.
func policyItems(rule string, limits []sluice.Limit) (names []string, field string) {
	var b strings.Builder
	for i, l := range limits {
		name := rule
		if len(limits) > 1 {
			name = rule + "-" + shortPeriod(l.Period)
			for _, prev := range names {
				if prev == name {
					name += "-" + strconv.Itoa(i+1)
				}
			}
		}
		names = append(names, name)
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`"` + name + `";q=`)
		b.WriteString(strconv.Itoa(l.Rate))
		b.WriteString(";w=")
		b.WriteString(strconv.FormatInt(ceilSeconds(l.Period), 10))
	}
	return names, b.String()
}

func shortPeriod(d time.Duration) string {
	for _, u := range []struct {
		s string
		d time.Duration
	}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}} {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.s
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

// ceilSeconds rounds d up to whole seconds: a client told to wait less
// than the true wait would be denied again.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// writeFields sets Retry-After when deny ≥ 0, and the rate-limit fields of
// the Enforce rules in as, building every value in st's buffer so that a
// request costs no allocation here.
func (m *Middleware) writeFields(h http.Header, st *reqState, as []applied, deny int) {
	b := st.arr[:0]
	var ends [5]int // end offset of each value in b
	var keys [5]string
	n := 0
	cut := func(key string) {
		keys[n], ends[n] = key, len(b)
		n++
	}
	if deny >= 0 {
		b = strconv.AppendInt(b, max(ceilSeconds(as[deny].d.RetryAfter), 1), 10)
		cut(hdrRetryAfter)
	}
	bind := deny
	if bind < 0 {
		bind = binding(as)
	}
	if m.fields != FieldsNone && bind >= 0 {
		first := true
		for _, a := range as {
			if a.rule.Mode == Enforce {
				if !first {
					b = append(b, ", "...)
				}
				first = false
				b = append(b, a.rule.policyField...)
			}
		}
		cut(hdrRateLimitPolicy)
		first = true
		for _, a := range as {
			if a.rule.Mode == Enforce {
				if !first {
					b = append(b, ", "...)
				}
				first = false
				b = appendItem(b, a.rule.nameOf(a.d.Limit), a.d)
			}
		}
		cut(hdrRateLimit)
		if m.fields == FieldsDraftAndLegacy {
			d := as[bind].d
			b = strconv.AppendInt(b, int64(d.Limit.Rate), 10)
			cut(hdrLegacyLimit)
			b = strconv.AppendInt(b, int64(d.Remaining), 10)
			cut(hdrLegacyRemaining)
			b = strconv.AppendInt(b, ceilSeconds(d.ResetAfter), 10)
			cut(hdrLegacyReset)
		}
	}
	if n == 0 {
		return
	}
	// b is never written again, and lives as long as st: its bytes can
	// back the strings without a copy.
	s := unsafe.String(unsafe.SliceData(b), len(b))
	start := 0
	for i := range n {
		st.vals[i] = s[start:ends[i]]
		h[keys[i]] = st.vals[i : i+1 : i+1]
		start = ends[i]
	}
}

// appendItem appends one item of the RateLimit field:
// `"name";r=remaining;t=seconds until the quota is whole again`.
func appendItem(b []byte, name string, d sluice.Decision) []byte {
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `";r=`...)
	b = strconv.AppendInt(b, int64(max(d.Remaining, 0)), 10)
	b = append(b, ";t="...)
	return strconv.AppendInt(b, ceilSeconds(d.ResetAfter), 10)
}

// A Problem is the RFC 9457 problem details body ProblemHandler writes.
type Problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail,omitempty"`
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
}

// ProblemHandler answers a denied request with 429 Too Many Requests and
// an application/problem+json body (RFC 9457) of type ProblemType naming
// the violated policy, or, when the store failed and the middleware fails
// closed, with 503 Service Unavailable.
func ProblemHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o, _ := OutcomeOf(r)
		p := Problem{
			Type:   ProblemType,
			Title:  http.StatusText(http.StatusTooManyRequests),
			Status: http.StatusTooManyRequests,
		}
		if o.StoreFailed {
			p = Problem{Type: "about:blank", Title: http.StatusText(http.StatusServiceUnavailable), Status: http.StatusServiceUnavailable,
				Detail: "The rate limiter is unavailable; try again shortly."}
		} else {
			p.Detail = "Too many requests; retry after " + strconv.FormatInt(max(ceilSeconds(o.Decision.RetryAfter), 1), 10) + " s."
			if o.Policy != "" {
				p.ViolatedPolicies = []string{o.Policy}
			}
		}
		body, _ := json.Marshal(p) // a struct of strings and ints cannot fail
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(p.Status)
		_, _ = w.Write(body)
	})
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
