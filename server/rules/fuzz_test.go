package rules

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/store/memory"
)

// fuzzConfig is the fixed configuration FuzzEngine decides against: named
// rules with one and several limits, and a domain with every feature of
// the matcher (nesting, wildcards, a shared wildcard, shadow, quota,
// unlimited, a deny rule of rate 0, replaces).
const fuzzConfig = `rules:
  - name: login
    limits: ["3/min", "5/h sliding"]
  - name: api
    limits: ["10/s burst 4"]
  - name: log
    limits: ["4/min log"]
  - domain: edge
    descriptors:
      - key: remote_address
        limits: ["5/min"]
      - key: remote_address
        value: 10.0.0.1
        rate_limit: {unit: second, requests_per_unit: 0}
      - key: path
        value: /login
        rate_limit: {name: login_path, unit: minute, requests_per_unit: 2}
        descriptors:
          - key: remote_address
            limits: ["1/min fixed"]
      - key: path
        value: /api/*
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 6, replaces: [{name: login_path}]}
      - key: user
        shadow_mode: true
        rate_limit: {unit: minute, requests_per_unit: 1}
      - key: tenant
        quota_mode: true
        rate_limit: {unit: hour, requests_per_unit: 2}
      - key: health
        rate_limit: {unlimited: true}
`

// parseFuzzDescriptors reads descriptors from the fuzzer's text:
// descriptors separated by '|', entries by ',', key and value by '='.
// A descriptor ending in "#N" has its own cost N ("#0": no hits).
func parseFuzzDescriptors(s string) []Descriptor {
	if s == "" {
		return nil
	}
	var out []Descriptor
	for _, part := range strings.Split(s, "|") {
		var d Descriptor
		if i := strings.LastIndexByte(part, '#'); i >= 0 {
			if n, err := strconv.Atoi(part[i+1:]); err == nil && n >= 0 {
				d.Cost, d.NoHits, part = n, n == 0, part[:i]
			}
		}
		if part != "" {
			for _, e := range strings.Split(part, ",") {
				k, v, _ := strings.Cut(e, "=")
				d.Entries = append(d.Entries, Entry{Key: k, Value: v})
			}
		}
		out = append(out, d)
	}
	return out
}

// fuzzOps maps the fuzzer's op byte to every op, valid or not.
var fuzzOps = []sluice.Op{sluice.OpTake, sluice.OpTake, sluice.OpPeek, sluice.OpReset, sluice.OpRefund, sluice.Op(200)}

// FuzzEngine decides arbitrary requests (domain or rule name, descriptors,
// entries, costs, op) against fuzzConfig on a fresh memory store, twice
// at the same instant, and checks the engine's invariants: no panic;
// every error wraps a sentinel of package sluice; every decision keeps
// Remaining within its limit and gives a denial a RetryAfter; and the two
// requests together never take more of any state than its limit allows.
func FuzzEngine(f *testing.F) {
	for _, seed := range []struct {
		domain, descs string
		cost          int
		op            uint8
	}{
		{"login", "key=203.0.113.7", 0, 0},
		{"login", "key=203.0.113.7", 2, 0},
		{"api", "key=k", 5, 0},         // above the burst: a per-descriptor error
		{"log", "key=k|key=k#3", 1, 0}, // the same state twice in one request
		{"edge", "remote_address=1.2.3.4|path=/login,remote_address=1.2.3.4", 0, 0},
		{"edge", "path=/login|path=/api/v1", 1, 0}, // replaces
		{"edge", "remote_address=10.0.0.1", 0, 0},  // deny rule
		{"edge", "user=bob|remote_address=9.9.9.9", 0, 0},
		{"edge", "tenant=a|tenant=b#2", 1, 0}, // quota
		{"edge", "health=x#0|remote_address=5.5.5.5#0", 0, 2},
		{"edge", "remote_address=1.2.3.4", 0, 3}, // reset
		{"edge", "remote_address=1.2.3.4", 0, 4}, // refund: invalid
		{"edge", "remote_address=1.2.3.4", -1, 0},
		{"edge", "", 0, 0},
		{"edge", "|", 0, 0},
		{"nope", "a=b", 0, 0},
		{"", "key=%,=*#", 1, 5},
		{"edge", strings.Repeat("remote_address=1|", 300), 0, 0},
	} {
		f.Add(seed.domain, seed.descs, seed.cost, seed.op)
	}
	c, err := config.Parse("fuzz.yaml", []byte(fuzzConfig))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, domain, descs string, cost int, opByte uint8) {
		st := memory.New(memory.Config{SweepInterval: -1})
		defer st.Close()
		clk := &clock{t: start}
		e, err := New(Config{Store: st, Rules: c.Rules, Domains: c.Domains, Clock: clk.now})
		if err != nil {
			t.Fatal(err)
		}
		req := Request{Domain: domain, Descriptors: parseFuzzDescriptors(descs), Cost: cost, Op: fuzzOps[int(opByte)%len(fuzzOps)]}
		taken := map[string]int{} // by rule and entries: what the two requests took
		for range 2 {
			res, err := e.Check(context.Background(), req)
			if err != nil {
				checkFuzzError(t, req, err)
				return
			}
			checkFuzzResult(t, req, res, taken)
		}
	})
}

// checkFuzzError checks that err is one the engine documents: each wraps
// a sentinel of package sluice.
func checkFuzzError(t *testing.T, req Request, err error) {
	t.Helper()
	for _, s := range []error{sluice.ErrInvalidRequest, sluice.ErrInvalidLimit, sluice.ErrCostExceedsBurst, sluice.ErrStore} {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("Check(%+v) error = %v, want one wrapping a sentinel of package sluice", req, err)
}

// checkFuzzResult checks the invariants of one result, and adds what it
// took to taken.
func checkFuzzResult(t *testing.T, req Request, res Result, taken map[string]int) {
	t.Helper()
	if len(res.Statuses) != len(req.Descriptors) {
		t.Fatalf("Check(%+v) = %d statuses, want one per descriptor (%d)", req, len(res.Statuses), len(req.Descriptors))
	}
	enforcedDenial := false
	for i, st := range res.Statuses {
		ru, d := st.Rule, st.Decision
		switch {
		case req.Op == sluice.OpReset:
			continue // a reset answers nothing but its error
		case ru == nil:
			if !st.Allowed || !d.Allowed {
				t.Fatalf("descriptor %d without a rule: status %+v, want allowed", i, st)
			}
			continue
		case ru.Unlimited:
			if !st.Allowed || d.Remaining != -1 {
				t.Fatalf("descriptor %d, unlimited rule %s: status %+v, want allowed with Remaining -1", i, ru.ID, st)
			}
			continue
		case st.Err != nil:
			// Documented: a cost above the rule's MaxCost is denied
			// without asking the store (a shadow rule only reports it).
			if !errors.Is(st.Err, sluice.ErrCostExceedsBurst) || st.Allowed != ru.Shadow {
				t.Fatalf("descriptor %d, rule %s (shadow %v): Err = %v, Allowed %v; want ErrCostExceedsBurst and a denial", i, ru.ID, ru.Shadow, st.Err, st.Allowed)
			}
			enforcedDenial = enforcedDenial || !ru.Quota && !ru.Shadow
			continue
		}
		if most := d.Limit.MaxBurst(); d.Remaining > most {
			t.Fatalf("descriptor %d, rule %s: Remaining = %d, want at most the limit %v allows (%d)", i, ru.ID, d.Remaining, d.Limit, most)
		}
		if !d.Allowed && d.RetryAfter <= 0 {
			t.Fatalf("descriptor %d, rule %s: denied with RetryAfter %v, want > 0", i, ru.ID, d.RetryAfter)
		}
		if st.Allowed != (d.Allowed || ru.Shadow) || st.Shadowed != (!d.Allowed && ru.Shadow) {
			t.Fatalf("descriptor %d, rule %s (shadow %v): Allowed %v, Shadowed %v for decision Allowed %v", i, ru.ID, ru.Shadow, st.Allowed, st.Shadowed, d.Allowed)
		}
		if !st.Allowed && !ru.Quota {
			enforcedDenial = true
		}
		desc := req.Descriptors[i]
		if res.Allowed && req.Op == sluice.OpTake && d.Allowed && !desc.NoHits && !ru.Deny {
			cost := max(req.Cost, 1)
			if desc.Cost > 0 {
				cost = desc.Cost
			}
			k := ru.ID + "\x00" + string(entriesKey(desc.Entries, nil))
			taken[k] += cost
			if taken[k] > ru.MaxCost() {
				t.Fatalf("rule %s, entries %v: %d taken at one instant, want at most %d", ru.ID, desc.Entries, taken[k], ru.MaxCost())
			}
		}
	}
	if enforcedDenial && res.Allowed {
		t.Fatalf("Check(%+v) allowed with an enforced descriptor denied: %+v", req, res.Statuses)
	}
}
