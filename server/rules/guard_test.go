package rules

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
)

// TestGuard checks how the engine applies a Guard: to the keys of named
// rules (and the client's address) only, before their limits, with
// statuses that no shadow mode softens, and with each take the limits
// deny counted as a failure in the rule's jails.
func TestGuard(t *testing.T) {
	const yml = `rules:
  - name: login
    limits: ["1/min"]
  - name: dry
    shadow: true
    limits: ["1/min"]
  - domain: edge
    descriptors:
      - key: key
        limits: ["1/min"]
`
	c, err := config.Parse(t.Name()+".yaml", []byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	_, clk, st := engineFor(t, c)
	var allow, deny guard.List
	allow.AddKey("friend")
	deny.AddKey("foe")
	deny.AddPrefix(netip.MustParsePrefix("198.51.100.0/24"))
	jail, err := guard.NewJail(st, guard.JailConfig{Name: "j", MaxFailures: 1, BanTime: 5 * time.Minute, Jitter: -1, Clock: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	ban := 5 * time.Minute
	if _, err := jail.Ban(context.Background(), "thief", ban, "test"); err != nil {
		t.Fatal(err)
	}
	g := guard.NewGuard(guard.GuardConfig{Allow: &allow, Deny: &deny, Jails: []*guard.Jail{jail},
		Strikes: map[string][]*guard.Jail{"login": {jail}}, Clock: clk.now})
	e, err := New(Config{Store: st, Rules: c.Rules, Domains: c.Domains, Clock: clk.now, Guard: g})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		rule, actor string
		client      string
		op          sluice.Op
		allowed     bool
		guard       guard.Action
		retry       time.Duration
	}{
		{"login", "friend", "", sluice.OpTake, true, guard.Exempt, 0},
		{"login", "friend", "", sluice.OpTake, true, guard.Exempt, 0}, // nothing was counted
		{"login", "foe", "", sluice.OpTake, false, guard.Refuse, 0},
		{"login", "thief", "", sluice.OpPeek, false, guard.Banned, ban},
		{"dry", "thief", "", sluice.OpTake, false, guard.Banned, ban},           // shadow mode is the limits'
		{"login", "bob", "198.51.100.7", sluice.OpTake, false, guard.Refuse, 0}, // the client's address
		{"login", "bob", "", sluice.OpTake, true, guard.Pass, 0},
		{"login", "bob", "", sluice.OpPeek, false, guard.Pass, time.Minute}, // a peek is no strike
		{"dry", "bob", "", sluice.OpTake, true, guard.Pass, 0},
		{"dry", "bob", "", sluice.OpTake, true, guard.Pass, time.Minute},    // shadowed: no strike
		{"edge", "foe", "", sluice.OpTake, true, guard.Pass, 0},             // descriptors have no actor
		{"login", "bob", "", sluice.OpTake, false, guard.Pass, time.Minute}, // a strike: banned
		{"login", "bob", "", sluice.OpTake, false, guard.Banned, ban},
	}
	for i, tt := range tests {
		r := Request{Domain: tt.rule, Descriptors: []Descriptor{Key(tt.actor)}, Op: tt.op}
		if tt.client != "" {
			r.Client = netip.MustParseAddr(tt.client)
		}
		res, err := e.Check(context.Background(), r)
		if err != nil {
			t.Fatalf("%d: Check(%+v) = %v", i, r, err)
		}
		st := res.Statuses[0]
		if res.Allowed != tt.allowed || st.Guard != tt.guard || st.Decision.RetryAfter != tt.retry {
			t.Errorf("%d: Check(%s, %s, %v) = allowed %v, guard %v, RetryAfter %v; want %v, %v, %v",
				i, tt.rule, tt.actor, tt.op, res.Allowed, st.Guard, st.Decision.RetryAfter, tt.allowed, tt.guard, tt.retry)
		}
	}
	bans, _ := jail.Bans(context.Background())
	if len(bans) != 2 || bans[0].Key != "bob" {
		t.Errorf("bans = %+v, want bob's (one strike) and thief's", bans)
	}
	// A reset is never judged: the banned key's state is forgotten.
	if res, err := e.Check(context.Background(), Request{Domain: "login", Descriptors: []Descriptor{Key("thief")}, Op: sluice.OpReset}); err != nil || res.Statuses[0].Guard != guard.Pass {
		t.Errorf("reset of a banned key = %+v, %v; want the limits' reset", res, err)
	}
}
