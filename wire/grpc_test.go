package wire

import (
	"testing"
	"time"
)

func TestSeconds(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0"},
		{-time.Second, "0"},
		{12 * time.Second, "12"},
		{11988 * time.Millisecond, "11.988"},
		{11987*time.Millisecond + 1, "11.988"}, // rounded up: a client that waits less is denied again
		{time.Nanosecond, "0.001"},
	} {
		got := FormatSeconds(tt.d)
		if got != tt.want {
			t.Errorf("FormatSeconds(%v) = %q, want %q", tt.d, got, tt.want)
		}
		if back, ok := ParseSeconds(got); !ok || back < tt.d {
			t.Errorf("ParseSeconds(%q) = %v, %v; want at least %v", got, back, ok, tt.d)
		}
	}
	for _, bad := range []string{"", "-1", "soon", "NaN", "1e300"} {
		if d, ok := ParseSeconds(bad); ok {
			t.Errorf("ParseSeconds(%q) = %v, want refused", bad, d)
		}
	}
}
