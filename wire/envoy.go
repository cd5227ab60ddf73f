package wire

import (
	"strings"
	"time"
)

// An EnvoyUnit is a unit of time of Envoy's rate limit API: of the
// limits its service answers with (RateLimitResponse.RateLimit.Unit), of
// the limit overrides Envoy sends (envoy.type.v3.RateLimitUnit) and of
// its configuration files ("unit: minute"). Its value is the number both
// protobuf enums give the unit, so that EnvoyUnit(x.GetUnit()) reads
// either and the enum's type converts it back; envoy.type.v3 has no
// week yet, and a 7 there reads as a week, as the answers' enum numbers
// it. This is sluice's one table of Envoy's units.
//
// The zero value is EnvoyUnknown, Envoy's UNKNOWN, which has no period.
type EnvoyUnit int32

// Envoy's units, numbered as its protobuf enums number them.
const (
	EnvoyUnknown EnvoyUnit = iota
	EnvoySecond
	EnvoyMinute
	EnvoyHour
	EnvoyDay
	EnvoyMonth
	EnvoyYear
	EnvoyWeek
)

// envoyUnits are the names and lengths of the units, by number, as
// Envoy's service counts them: a month is 30 days, a year 365.
var envoyUnits = [...]struct {
	name string
	d    time.Duration
}{
	EnvoyUnknown: {"unknown", 0},
	EnvoySecond:  {"second", time.Second},
	EnvoyMinute:  {"minute", time.Minute},
	EnvoyHour:    {"hour", time.Hour},
	EnvoyDay:     {"day", 24 * time.Hour},
	EnvoyMonth:   {"month", 30 * 24 * time.Hour},
	EnvoyYear:    {"year", 365 * 24 * time.Hour},
	EnvoyWeek:    {"week", 7 * 24 * time.Hour},
}

// envoyLongest are the units longest first, with their lengths, for
// EnvoyUnitOf: a lookup on every answer to Envoy.
var envoyLongest = func() (out [len(envoyUnits) - 1]struct {
	u EnvoyUnit
	d time.Duration
}) {
	for i, u := range [...]EnvoyUnit{EnvoyYear, EnvoyMonth, EnvoyWeek, EnvoyDay, EnvoyHour, EnvoyMinute, EnvoySecond} {
		out[i].u, out[i].d = u, envoyUnits[u].d
	}
	return out
}()

// Period returns the length of u, 0 for EnvoyUnknown and for a number
// that is no unit.
func (u EnvoyUnit) Period() time.Duration {
	if u < 0 || int(u) >= len(envoyUnits) {
		return 0
	}
	return envoyUnits[u].d
}

// String returns the name of u as Envoy's configuration files write it,
// "second" to "year", or "unknown".
func (u EnvoyUnit) String() string {
	if u.Period() == 0 {
		return "unknown"
	}
	return envoyUnits[u].name
}

// ParseEnvoyUnit returns the unit a configuration file names: "second",
// "minute", "hour", "day", "week", "month" or "year", in any case. It
// reports false for any other name.
func ParseEnvoyUnit(name string) (EnvoyUnit, bool) {
	for u, e := range envoyUnits {
		if e.d > 0 && strings.EqualFold(name, e.name) {
			return EnvoyUnit(u), true
		}
	}
	return EnvoyUnknown, false
}

// EnvoyUnitOf returns the longest unit whose whole multiple period is,
// and that multiple: an hour and 1 for an hour, a minute and 5 for 5
// minutes. It returns EnvoyUnknown and 0 for a period no unit divides
// (1500 ms).
func EnvoyUnitOf(period time.Duration) (EnvoyUnit, int64) {
	for _, e := range envoyLongest {
		if period >= e.d && period%e.d == 0 {
			return e.u, int64(period / e.d)
		}
	}
	return EnvoyUnknown, 0
}
