package server

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/server/rules"
)

// A gate is the guard section of one configuration as every API applies
// it: the allow and deny lists, the jails, and which rules' denials each
// jail counts. Forward-auth asks it about the client's address; the
// engine asks it, as a rules.Guard, about the key of every named rule on
// the HTTP and gRPC APIs. A gate is safe for concurrent use; its lists
// may be edited (by the admin API) while it is used.
type gate struct {
	allow, deny *guard.List
	jails       map[string]*guard.Jail // by name, ManualJail included
	feeds       map[string][]string    // rule → the jails counting its denials
	log         *slog.Logger
}

var _ rules.Guard = (*gate)(nil)

// listed tells what the lists say of a client's address (when valid) and
// key: Exempt (allow list), Refuse (deny list), or Pass. The address is
// looked up before the key, the allow list before the deny list.
func (g *gate) listed(addr netip.Addr, key string) rules.Action {
	switch {
	case addr.IsValid() && g.allow.Contains(addr):
		return rules.Exempt
	case addr.IsValid() && g.deny.Contains(addr):
		return rules.Refuse
	case g.allow.ContainsKey(key):
		return rules.Exempt
	case g.deny.ContainsKey(key):
		return rules.Refuse
	}
	return rules.Pass
}

// banned reports whether key is banned in any jail, and for how long.
// A store failure is logged and does not ban: the rule's limits still
// apply, under its own failure policy.
func (g *gate) banned(ctx context.Context, key string) (left time.Duration, banned bool) {
	for name, j := range g.jails {
		l, b, err := j.Banned(ctx, key)
		if err != nil {
			g.log.WarnContext(ctx, "jail not checked", "jail", name, "err", err)
			continue
		}
		if b && l > left {
			left, banned = l, true
		}
	}
	return left, banned
}

// strike counts a denial of key under rule in every jail that counts
// the rule's denials.
func (g *gate) strike(ctx context.Context, rule, key string) {
	for _, name := range g.feeds[rule] {
		if _, _, err := g.jails[name].Fail(ctx, key, "denials under rule "+rule); err != nil {
			g.log.WarnContext(ctx, "jail not told", "jail", name, "err", err)
		}
	}
}

// Judge applies the lists to the key of a named rule (its address lists
// too, when the key is an address), then, for a rule whose denials a jail
// counts, the bans of every jail: a banned key is refused until its ban
// ends. Rules that feed no jail skip the ban lookup, which costs a store
// round trip per jail.
func (g *gate) Judge(ctx context.Context, ru *rules.Rule, key string) rules.Verdict {
	addr, _ := netip.ParseAddr(key)
	if a := g.listed(addr, key); a != rules.Pass {
		return rules.Verdict{Action: a}
	}
	if len(g.feeds[ru.Name]) > 0 {
		if left, ok := g.banned(ctx, key); ok {
			return rules.Verdict{Action: rules.Ban, Left: left}
		}
	}
	return rules.Verdict{}
}

// Denied counts a denial of key under a named rule in the jails that
// count the rule's denials.
func (g *gate) Denied(ctx context.Context, ru *rules.Rule, key string) {
	g.strike(ctx, ru.Name, key)
}
