// Package ratelimitheader formats the values of the IETF RateLimit and
// RateLimit-Policy header fields (draft-ietf-httpapi-ratelimit-headers)
// and of Retry-After, for every HTTP front of sluice: the httplimit
// middleware, the server's API and its rule engine write the same fields
// from this one implementation.
package ratelimitheader

import (
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// Policy names each limit of a rule and returns the names, in the order
// of limits, and the rule's RateLimit-Policy value, one item
// `"name";q=rate;w=seconds` per limit. A rule of one limit names it after
// the rule; a rule of several appends the limit's period ("login-1m",
// "login-1h"), and a number when two limits share a period ("x-1m-2").
// rule must be printable ASCII without '"' or '\'.
func Policy(rule string, limits []sluice.Limit) (names []string, policy string) {
	var b strings.Builder
	for i, l := range limits {
		name := rule
		if len(limits) > 1 {
			name = rule + "-" + ShortPeriod(l.Period)
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
		b.WriteString(strconv.FormatInt(CeilSeconds(l.Period), 10))
	}
	return names, b.String()
}

// AppendItem appends to b one item of the RateLimit field for decision d
// of the limit called name: `"name";r=remaining;t=seconds until the quota
// is whole again`. It allocates only if b must grow.
func AppendItem(b []byte, name string, d sluice.Decision) []byte {
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `";r=`...)
	b = strconv.AppendInt(b, int64(max(d.Remaining, 0)), 10)
	b = append(b, ";t="...)
	return strconv.AppendInt(b, CeilSeconds(d.ResetAfter), 10)
}

// ShortPeriod writes d in the largest whole unit: 1m, 36h, 1500ms.
func ShortPeriod(d time.Duration) string {
	for _, u := range [...]struct {
		s string
		d time.Duration
	}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}} {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.s
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

// CeilSeconds rounds d up to whole seconds, 0 for d ≤ 0: a client told to
// wait less than the true wait would be denied again. Retry-After is
// max(CeilSeconds(wait), 1).
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
