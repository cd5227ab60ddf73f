package wire_test

import (
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/sluicehq/sluice/wire"
)

// TestEnvoyUnit checks each unit against both of Envoy's enums: its
// number, its name and its length.
func TestEnvoyUnit(t *testing.T) {
	tests := []struct {
		u      wire.EnvoyUnit
		answer pb.RateLimitResponse_RateLimit_Unit
		period time.Duration
		name   string
	}{
		{wire.EnvoyUnknown, pb.RateLimitResponse_RateLimit_UNKNOWN, 0, "unknown"},
		{wire.EnvoySecond, pb.RateLimitResponse_RateLimit_SECOND, time.Second, "second"},
		{wire.EnvoyMinute, pb.RateLimitResponse_RateLimit_MINUTE, time.Minute, "minute"},
		{wire.EnvoyHour, pb.RateLimitResponse_RateLimit_HOUR, time.Hour, "hour"},
		{wire.EnvoyDay, pb.RateLimitResponse_RateLimit_DAY, 24 * time.Hour, "day"},
		{wire.EnvoyWeek, pb.RateLimitResponse_RateLimit_WEEK, 7 * 24 * time.Hour, "week"},
		{wire.EnvoyMonth, pb.RateLimitResponse_RateLimit_MONTH, 30 * 24 * time.Hour, "month"},
		{wire.EnvoyYear, pb.RateLimitResponse_RateLimit_YEAR, 365 * 24 * time.Hour, "year"},
	}
	for _, tt := range tests {
		if got := wire.EnvoyUnit(tt.answer); got != tt.u || got.Period() != tt.period || got.String() != tt.name {
			t.Errorf("EnvoyUnit(%v) = %d %v %q, want %d %v %q", tt.answer, got, got.Period(), got.String(), tt.u, tt.period, tt.name)
		}
		if name, ok := typev3.RateLimitUnit_name[int32(tt.u)]; ok && name != tt.answer.String() {
			t.Errorf("type.v3 names unit %d %s, the answers' enum %s", tt.u, name, tt.answer)
		}
		if got, ok := wire.ParseEnvoyUnit(tt.name); tt.period > 0 && (got != tt.u || !ok) {
			t.Errorf("ParseEnvoyUnit(%q) = %v, %v; want %v, true", tt.name, got, ok, tt.u)
		}
	}
	for _, name := range []string{"", "unknown", "fortnight", "minutes", "s"} {
		if u, ok := wire.ParseEnvoyUnit(name); ok {
			t.Errorf("ParseEnvoyUnit(%q) = %v, true; want false", name, u)
		}
	}
	if u, ok := wire.ParseEnvoyUnit("MINUTE"); u != wire.EnvoyMinute || !ok {
		t.Errorf("ParseEnvoyUnit(MINUTE) = %v, %v; want minute, true", u, ok)
	}
	for _, n := range []int32{-1, 8, 1 << 20} {
		if u := wire.EnvoyUnit(n); u.Period() != 0 || u.String() != "unknown" {
			t.Errorf("EnvoyUnit(%d) = %v %q, want 0 unknown", n, u.Period(), u.String())
		}
	}
}

// TestEnvoyUnitOf finds the longest unit that divides a period.
func TestEnvoyUnitOf(t *testing.T) {
	tests := []struct {
		period time.Duration
		u      wire.EnvoyUnit
		n      int64
	}{
		{time.Second, wire.EnvoySecond, 1},
		{90 * time.Second, wire.EnvoySecond, 90},
		{5 * time.Minute, wire.EnvoyMinute, 5},
		{time.Hour, wire.EnvoyHour, 1},
		{36 * time.Hour, wire.EnvoyHour, 36},
		{14 * 24 * time.Hour, wire.EnvoyWeek, 2},
		{30 * 24 * time.Hour, wire.EnvoyMonth, 1},
		{365 * 24 * time.Hour, wire.EnvoyYear, 1},
		{1500 * time.Millisecond, wire.EnvoyUnknown, 0},
		{time.Millisecond, wire.EnvoyUnknown, 0},
		{0, wire.EnvoyUnknown, 0},
	}
	for _, tt := range tests {
		if u, n := wire.EnvoyUnitOf(tt.period); u != tt.u || n != tt.n {
			t.Errorf("EnvoyUnitOf(%v) = %v, %d; want %v, %d", tt.period, u, n, tt.u, tt.n)
		}
	}
}
