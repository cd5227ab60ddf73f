package sluice_test

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice"
)

// TestFailurePolicy: each policy's name parses back to it; other names,
// and values past the last policy, are refused.
func TestFailurePolicy(t *testing.T) {
	for _, tt := range []struct {
		p         sluice.FailurePolicy
		name      string
		openClose bool
	}{
		{sluice.FailOpen, "open", true},
		{sluice.FailClosed, "closed", true},
		{sluice.FailLocal, "local", false},
	} {
		if got := tt.p.String(); got != tt.name {
			t.Errorf("%d.String() = %q, want %q", tt.p, got, tt.name)
		}
		if got, err := sluice.ParseFailurePolicy(tt.name); got != tt.p || err != nil {
			t.Errorf("ParseFailurePolicy(%q) = %v, %v; want %v", tt.name, got, err, tt.p)
		}
		if err := tt.p.CheckOpenClosed(); (err == nil) != tt.openClose || err != nil && !errors.Is(err, sluice.ErrInvalidRequest) {
			t.Errorf("%v.CheckOpenClosed() = %v, want nil %v", tt.p, err, tt.openClose)
		}
		if !tt.p.Valid() {
			t.Errorf("%v.Valid() = false", tt.p)
		}
	}
	var zero sluice.FailurePolicy
	if zero != sluice.FailOpen {
		t.Errorf("the zero FailurePolicy is %v, want open", zero)
	}
	for _, name := range []string{"", "Open", "fail-open", "fail_closed", "deny", "local "} {
		if p, err := sluice.ParseFailurePolicy(name); !errors.Is(err, sluice.ErrInvalidRequest) {
			t.Errorf("ParseFailurePolicy(%q) = %v, %v; want ErrInvalidRequest", name, p, err)
		}
	}
	bad := sluice.FailurePolicy(7)
	if bad.Valid() || bad.String() != "FailurePolicy(7)" || !errors.Is(bad.CheckOpenClosed(), sluice.ErrInvalidRequest) {
		t.Errorf("FailurePolicy(7): Valid %v, String %q, CheckOpenClosed %v", bad.Valid(), bad, bad.CheckOpenClosed())
	}
}
