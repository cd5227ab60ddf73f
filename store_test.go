package sluice

import (
	"errors"
	"testing"
	"time"
)

func TestRequestValidate(t *testing.T) {
	l := PerSecond(10)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		r    Request
		want error
	}{
		{"ok", Request{Limits: []Limit{l}, Cost: 1}, nil},
		{"ok reset without cost", Request{Limits: []Limit{l}, Op: OpReset}, nil},
		{"ok multi", Request{Limits: []Limit{l, PerHour(100)}, Cost: 10}, nil},
		{"no limits", Request{Cost: 1}, ErrInvalidRequest},
		{"bad op", Request{Limits: []Limit{l}, Cost: 1, Op: 42}, ErrInvalidRequest},
		{"zero cost", Request{Limits: []Limit{l}}, ErrInvalidRequest},
		{"negative cost", Request{Limits: []Limit{l}, Cost: -1}, ErrInvalidRequest},
		{"cost over burst", Request{Limits: []Limit{l}, Cost: 11}, ErrCostExceedsBurst},
		{"cost over one limit of two", Request{Limits: []Limit{PerHour(100), l}, Cost: 11}, ErrCostExceedsBurst},
		{"invalid limit", Request{Limits: []Limit{{Rate: 1}}, Cost: 1}, ErrInvalidLimit},
		{"shared state", Request{Limits: []Limit{l, PerSecond(5)}, Cost: 1}, ErrInvalidRequest},
		{"refund without time", Request{Limits: []Limit{l}, Cost: 1, Op: OpRefund}, ErrInvalidRequest},
		{"refund", Request{Limits: []Limit{l}, Cost: 1, Op: OpRefund, At: now}, nil},
		{"penalty", Request{Limits: []Limit{l}, Cost: 10, Op: OpInsert}, nil},
		{"reward", Request{Limits: []Limit{l}, Cost: -10, Op: OpInsert}, nil},
		{"insert of 0", Request{Limits: []Limit{l}, Op: OpInsert}, ErrInvalidRequest},
		{"penalty over burst", Request{Limits: []Limit{l}, Cost: 11, Op: OpInsert}, ErrCostExceedsBurst},
		{"reward over burst", Request{Limits: []Limit{l}, Cost: -11, Op: OpInsert}, ErrCostExceedsBurst},
		{"before 1970", Request{Limits: []Limit{l}, Cost: 1, Now: time.Unix(-5, 0)}, ErrInvalidRequest},
		{"epoch", Request{Limits: []Limit{l}, Cost: 1, Now: time.Unix(0, 0)}, ErrInvalidRequest},
		{"after 2200", Request{Limits: []Limit{l}, Cost: 1, Now: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}, ErrInvalidRequest},
	}
	for _, tt := range tests {
		err := tt.r.Validate()
		if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("%s: Validate() = %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestActorKey(t *testing.T) {
	long := string(make([]byte, 1<<20))
	tests := []struct {
		in     string
		hashed bool
	}{
		{"", false},
		{"1.2.3.4", false},
		{"a\x00b{c}", false},
		{string(make([]byte, MaxActorLen)), false},
		{string(make([]byte, MaxActorLen+1)), true},
		{long, true},
		{"#abc", true},
	}
	for _, tt := range tests {
		got := actorKey(tt.in)
		if hashed := got != tt.in; hashed != tt.hashed {
			t.Errorf("actorKey(%.20q…) hashed = %v, want %v", tt.in, hashed, tt.hashed)
		}
		if len(got) > MaxActorLen {
			t.Errorf("len(actorKey(%.20q…)) = %d, want ≤ %d", tt.in, len(got), MaxActorLen)
		}
	}
	if actorKey("#x") == actorKey(actorKey("#x")) {
		t.Error("a hashed key and the hash of it collide")
	}
}

func TestDecisionBinds(t *testing.T) {
	allow5 := Decision{Allowed: true, Remaining: 5}
	allow2 := Decision{Allowed: true, Remaining: 2}
	deny1s := Decision{RetryAfter: time.Second}
	deny1m := Decision{RetryAfter: time.Minute}
	tests := []struct {
		d, other Decision
		want     bool
	}{
		{allow2, allow5, true}, {allow5, allow2, false},
		{deny1s, allow2, true}, {allow2, deny1s, false},
		{deny1m, deny1s, true}, {deny1s, deny1m, false},
	}
	for _, tt := range tests {
		if got := tt.d.Binds(tt.other); got != tt.want {
			t.Errorf("%+v.Binds(%+v) = %v, want %v", tt.d, tt.other, got, tt.want)
		}
	}
}
