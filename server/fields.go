package server

import (
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// fields holds what a rule writes in the RateLimit header fields (IETF
// draft-ietf-httpapi-ratelimit-headers), computed once per rule.
type fields struct {
	// policy is the RateLimit-Policy value: `"name";q=rate;w=seconds`
	// for every limit of the rule.
	policy string
	// names maps each limit's StateID (unique within a rule) to its
	// item name.
	names map[uint64]string
}

// newFields names each limit of a rule: after the rule when it is alone,
// otherwise after the rule and the limit's period ("login-1m", "login-1h"),
// numbered when two limits share a period.
func newFields(rule string, limits []sluice.Limit) fields {
	f := fields{names: make(map[uint64]string, len(limits))}
	used := make(map[string]bool, len(limits))
	items := make([]string, len(limits))
	for i, l := range limits {
		name := rule
		if len(limits) > 1 {
			name = rule + "-" + shortPeriod(l.Period)
			if used[name] {
				name += "-" + strconv.Itoa(i+1)
			}
		}
		used[name] = true
		f.names[l.StateID()] = name
		items[i] = `"` + name + `";q=` + strconv.Itoa(l.Rate) + ";w=" + strconv.FormatInt(ceilSeconds(l.Period), 10)
	}
	f.policy = strings.Join(items, ", ")
	return f
}

// shortPeriod writes d in the largest whole unit: 1m, 36h, 1500ms.
func shortPeriod(d time.Duration) string {
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

// ceilSeconds rounds d up to whole seconds.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
