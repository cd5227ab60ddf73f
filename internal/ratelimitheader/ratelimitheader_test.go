package ratelimitheader

import (
	"testing"

	"github.com/sluicehq/sluice"
)

func TestPolicy(t *testing.T) {
	tests := []struct {
		rule   string
		limits []string
		want   string
	}{
		{"api", []string{"100/s burst 200"}, `"api";q=100;w=1`},
		{"login", []string{"5/min", "20/h"}, `"login-1m";q=5;w=60, "login-1h";q=20;w=3600`},
		{"x", []string{"5/min", "5/min fixed", "3/1500ms"}, `"x-1m";q=5;w=60, "x-1m-2";q=5;w=60, "x-1500ms";q=3;w=2`},
		{"d", []string{"1/day", "7/w"}, `"d-1d";q=1;w=86400, "d-7d";q=7;w=604800`},
	}
	for _, tt := range tests {
		var limits []sluice.Limit
		for _, s := range tt.limits {
			l, err := sluice.ParseLimit(s)
			if err != nil {
				t.Fatal(err)
			}
			limits = append(limits, l)
		}
		if _, got := Policy(tt.rule, limits); got != tt.want {
			t.Errorf("Policy(%q, %q) = %q, want %q", tt.rule, tt.limits, got, tt.want)
		}
	}
}
