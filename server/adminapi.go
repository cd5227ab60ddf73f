package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/notify"
	"github.com/sluicehq/sluice/server/admin"
	"github.com/sluicehq/sluice/server/httpapi"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/wire"
)

// The Service is what its admin API manages.
var _ admin.Backend = (*Service)(nil)

// AdminHandler returns the admin API (package server/admin) of the
// service, which checks the token of the configuration in force; nil when
// the configuration has no admin token. Serve it on its own listener,
// loopback by default.
func (s *Service) AdminHandler() http.Handler {
	if !s.Config().Admin.Enabled() {
		return nil
	}
	return s.m.instrument("admin", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.state.Load().admin.ServeHTTP(w, r)
	}))
}

// Rules lists the rules in force (named rules and the descriptor rules
// of domains), with their failure policy and jails.
func (s *Service) Rules() []admin.RuleView {
	st := s.state.Load()
	jails := map[string][]string{}
	for _, j := range st.cfg.Guard.Jails {
		for _, r := range j.Rules {
			jails[r] = append(jails[r], j.Name)
		}
	}
	var out []admin.RuleView
	for _, ru := range st.engine.Rules() {
		ar := admin.RuleView{Name: ru.ID, Mode: "enforce", Failure: "none (memory store)", Jails: jails[ru.ID]}
		if s.st.policies != nil {
			ar.Failure = st.policies[scopeOf(ru)].String()
		}
		switch {
		case ru.Unlimited:
			ar.Limits = []string{"unlimited"}
		case ru.Deny:
			ar.Limits = []string{"deny"}
		}
		if !ru.Unlimited && !ru.Deny {
			for _, l := range ru.Limits {
				ar.Limits = append(ar.Limits, l.String())
			}
		}
		if ru.Shadow {
			ar.Mode = "shadow"
		}
		out = append(out, ar)
	}
	return out
}

// Peek reports what a take of one unit by key under the named rule would
// get, taking nothing.
func (s *Service) Peek(ctx context.Context, rule, key string) (admin.Decision, error) {
	st := s.state.Load()
	if _, ok := st.cfg.Rule(rule); !ok {
		return admin.Decision{}, fmt.Errorf("named rule %q: %w", rule, admin.ErrNotFound)
	}
	res, err := st.engine.Check(ctx, rules.Request{Domain: rule, Descriptors: []rules.Descriptor{rules.Key(key)}, Op: sluice.OpPeek})
	if err != nil {
		return admin.Decision{}, err
	}
	c := httpapi.NewCheckResponse(rule, res.Statuses[0].Decision)
	return admin.Decision{Allowed: res.Allowed, Rule: rule, Policy: c.Policy, Remaining: c.Remaining,
		ResetAfter: c.ResetAfter, RetryAfter: c.RetryAfter}, nil
}

func (s *Service) now() time.Time {
	if s.opts.Clock != nil {
		return s.opts.Clock()
	}
	return time.Now()
}

// Bans lists the bans in force that the service enforces.
func (s *Service) Bans(ctx context.Context) ([]wire.Ban, error) {
	bans, err := s.st.registry.List(ctx, s.now())
	if err != nil {
		return nil, err
	}
	out := make([]wire.Ban, len(bans))
	for i, b := range bans {
		out[i] = adminBan(b)
	}
	return out, nil
}

// adminBan returns b as the admin API tells it.
func adminBan(b guard.Ban) wire.Ban {
	out := wire.Ban{Jail: b.Jail, Key: b.Key, Reason: b.Reason, Since: b.Since, Until: b.Until, Offences: b.Offences, Collateral: b.Collateral}
	if b.Collateral > 0 {
		out.CollateralUnit = b.CollateralUnit()
	}
	return out
}

// Ban bans key in jail for d, or the jail's own length when d is 0. key
// is written as in the allow and deny lists: an address, a network, or
// "key:" and a key (a bare key is a key too).
func (s *Service) Ban(ctx context.Context, jail, key string, d time.Duration, reason string) (wire.Ban, error) {
	j := s.state.Load().jails[jail]
	if j == nil {
		return wire.Ban{}, fmt.Errorf("jail %q: %w", jail, admin.ErrNotFound)
	}
	if reason == "" {
		reason = "banned by an admin"
	}
	b, err := j.Ban(ctx, banKey(key), d, reason)
	return adminBan(b), err
}

// Lift ends the ban of key, written as Ban reads it, in jail. It returns
// admin.ErrNotFound if the jail has no such ban in force.
func (s *Service) Lift(ctx context.Context, jail, key string) error {
	j := s.state.Load().jails[jail]
	if j == nil {
		return fmt.Errorf("jail %q: %w", jail, admin.ErrNotFound)
	}
	err := j.Lift(ctx, banKey(key))
	if errors.Is(err, guard.ErrNotBanned) {
		return fmt.Errorf("no ban of %s in jail %q: %w", key, jail, admin.ErrNotFound)
	}
	return err
}

// banKey reads an admin's ban entry as the lists write theirs (see
// guard.ParseEntry), where a bare key is a key too.
func banKey(entry string) string {
	e, err := guard.ParseEntry(entry)
	if err != nil {
		return entry // a bare key
	}
	if k, ok := e.Key(); ok {
		return k
	}
	return e.String()
}

func (st *state) list(name string) (*guard.List, error) {
	switch name {
	case "allow":
		return st.allow, nil
	case "deny":
		return st.deny, nil
	}
	return nil, fmt.Errorf("list %q (want allow or deny): %w", name, admin.ErrNotFound)
}

// List returns the entries of the allow or deny list: networks, then
// "key:" entries.
func (s *Service) List(name string) ([]string, error) {
	l, err := s.state.Load().list(name)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, e := range l.Entries() {
		out = append(out, e.String())
	}
	return out, nil
}

// Edit adds entry to the allow or deny list, or removes it. Edits apply
// at once and are replayed onto the lists of every configuration a
// reload builds, until the process restarts: put lasting entries in the
// file. At most maxEdits entries are kept edited.
func (s *Service) Edit(name, entry string, add bool) error {
	s.reload.Lock() // a reload meanwhile would build lists without it
	defer s.reload.Unlock()
	st := s.state.Load()
	if _, err := st.list(name); err != nil {
		return err
	}
	en, err := guard.ParseEntry(entry)
	if err != nil {
		return err
	}
	e := listEdit{list: name, entry: en, add: add}
	if err := s.edits.room(e); err != nil {
		return err
	}
	if err := st.apply(e); err != nil {
		return err
	}
	s.edits.record(e)
	return nil
}

// maxEdits bounds the list edits the admin API keeps for reloads.
const maxEdits = 10_000

// A listEdit is an admin's change to the allow or deny list.
type listEdit struct {
	list  string
	entry guard.Entry
	add   bool
}

// listEdits are the edits made through the admin API, latest last, one
// per list and entry, to replay after a reload. Service.reload guards it.
type listEdits []listEdit

// room returns an error if keeping e would exceed maxEdits.
func (es listEdits) room(e listEdit) error {
	if len(es) >= maxEdits && !slices.ContainsFunc(es, e.same) {
		return fmt.Errorf("%d entries edited through the admin API, the most it keeps: put lasting entries in the configuration file", maxEdits)
	}
	return nil
}

// record keeps e in place of an earlier edit of its entry.
func (es *listEdits) record(e listEdit) {
	*es = append(slices.DeleteFunc(*es, e.same), e)
}

// same reports whether o edits the entry e edits.
func (e listEdit) same(o listEdit) bool { return o.list == e.list && o.entry == e.entry }

// apply makes edit e to the state's list.
func (st *state) apply(e listEdit) error {
	l, err := st.list(e.list)
	if err != nil {
		return err
	}
	if e.add {
		l.Add(e.entry)
	} else {
		l.Remove(e.entry)
	}
	return nil
}

// Denials lists the latest denials of the rules, newest first.
func (s *Service) Denials() []admin.Denial {
	ds := s.denials.list()
	out := make([]admin.Denial, len(ds))
	for i, d := range ds {
		out[i] = admin.Denial{Time: d.Time, Rule: d.Rule, Key: d.Key, RetryAfter: httpapi.Seconds(d.RetryAfter)}
	}
	return out
}

// Audit returns the audit trail's entries with Seq above after and Time
// not before since, oldest first, at most limit (see notify.Trail.Page).
func (s *Service) Audit(after uint64, since time.Time, limit int) notify.Page {
	return s.notes.Audit(after, since, limit)
}
