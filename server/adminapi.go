package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/notify"
	"github.com/sluicehq/sluice/server/admin"
	"github.com/sluicehq/sluice/server/bannotify"
	"github.com/sluicehq/sluice/server/httpapi"
	"github.com/sluicehq/sluice/server/rules"
	"github.com/sluicehq/sluice/wire"
)

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

// Admin returns what the admin API manages: the rules, bans, lists and
// denials of the configuration in force, and the dashboard's feed.
func (s *Service) Admin() admin.Backend { return s.admin }

// adminBackend is the admin API's view of a Service: an admin.Backend
// and an admin.Auditor over the configuration in force, its stores and
// its ban registry. It is safe for concurrent use.
type adminBackend struct {
	state   func() *state // the configuration in force
	stores  *stores
	clock   func() time.Time
	denials *denialLog
	live    *live // nil when the admin API is off
	m       *metrics
	notes   *bannotify.Notifier
	reload  *sync.Mutex // the Service's: list edits and reloads in turn
	edits   *listEdits  // replayed by each build, under reload
}

var (
	_ admin.Backend = (*adminBackend)(nil)
	_ admin.Auditor = (*adminBackend)(nil)
)

// Rules lists the rules in force (named rules and the descriptor rules
// of domains), with their failure policy and jails.
func (a *adminBackend) Rules() []admin.RuleView {
	st := a.state()
	jails := map[string][]string{}
	for _, j := range st.cfg.Guard.Jails {
		for _, r := range j.Rules {
			jails[r] = append(jails[r], j.Name)
		}
	}
	var out []admin.RuleView
	for _, ru := range st.engine.Rules() {
		ar := admin.RuleView{Name: ru.ID, Mode: "enforce", Failure: "none (memory store)", Jails: jails[ru.ID], Limits: limitsView(ru)}
		if a.stores.policies != nil {
			ar.Failure = st.policies[scopeOf(ru)].String()
		}
		if ru.Shadow {
			ar.Mode = "shadow"
		}
		out = append(out, ar)
	}
	return out
}

// limitsView writes the limits of ru as the admin API lists them.
func limitsView(ru *rules.Rule) []string {
	switch {
	case ru.Unlimited:
		return []string{"unlimited"}
	case ru.Deny:
		return []string{"deny"}
	}
	out := make([]string, len(ru.Limits))
	for i, l := range ru.Limits {
		out[i] = l.String()
	}
	return out
}

// Peek reports what a take of one unit by key under the named rule would
// get, taking nothing.
func (a *adminBackend) Peek(ctx context.Context, rule, key string) (admin.Decision, error) {
	st := a.state()
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

// Bans lists the bans in force that the service enforces, by jail and
// key, with the requests each refused.
func (a *adminBackend) Bans(ctx context.Context) ([]wire.Ban, error) {
	bans, err := a.stores.registry.List(ctx, a.clock())
	if err != nil {
		return nil, err
	}
	return a.wireBans(bans), nil
}

// inForce is a registry that lists its bans faster in no order.
type inForce interface {
	InForce(now time.Time) []guard.Ban
}

// BansInAnyOrder lists the bans as Bans does, in no order when the
// registry lists them faster so: a page of an attack's 100,000 bans
// sorts them its own way.
func (a *adminBackend) BansInAnyOrder(ctx context.Context) ([]wire.Ban, error) {
	if r, ok := a.stores.registry.(inForce); ok {
		return a.wireBans(r.InForce(a.clock())), nil
	}
	return a.Bans(ctx)
}

// wireBans returns bans as the admin API lists them, with the requests
// each refused.
func (a *adminBackend) wireBans(bans []guard.Ban) []wire.Ban {
	refused := a.stores.registry.Bans().Refusals()
	out := make([]wire.Ban, len(bans))
	for i, b := range bans {
		out[i] = adminBan(b)
		out[i].Refused = refused[guard.BanID{Jail: b.Jail, Key: b.Key}]
	}
	return out
}

// adminBan returns b as the admin API tells it.
func adminBan(b guard.Ban) wire.Ban {
	out := wire.Ban{Jail: b.Jail, Key: b.Key, Reason: b.Reason, Since: b.Since, Until: b.Until, Offences: b.Offences, Collateral: b.Collateral}
	if b.Collateral > 0 {
		out.CollateralUnit = b.CollateralUnit()
	}
	return out
}

// Ban bans e in jail for d, or the jail's own length when d is 0.
func (a *adminBackend) Ban(ctx context.Context, jail string, e guard.Entry, d time.Duration, reason string) (wire.Ban, error) {
	j := a.state().jails[jail]
	if j == nil {
		return wire.Ban{}, fmt.Errorf("jail %q: %w", jail, admin.ErrNotFound)
	}
	if reason == "" {
		reason = "banned by an admin"
	}
	b, err := j.Ban(ctx, banKey(e), d, reason)
	return adminBan(b), err
}

// Lift ends the ban of e in jail. It returns admin.ErrNotFound if the
// jail has no such ban in force. A jail a reload removed has no Jail
// any more, but its bans stay in force until they lapse: they are lifted
// from the registry.
func (a *adminBackend) Lift(ctx context.Context, jail string, e guard.Entry) error {
	var err error
	if j := a.state().jails[jail]; j != nil {
		err = j.Lift(ctx, banKey(e))
	} else if err = a.stores.registry.Delete(ctx, jail, banKey(e)); err == nil {
		a.notes.Lift(guard.Ban{Jail: jail, Key: guard.BanKey(banKey(e))})
	}
	if errors.Is(err, guard.ErrNotBanned) {
		return fmt.Errorf("no ban of %s in jail %q: %w", e, jail, admin.ErrNotFound)
	}
	return err
}

// LiftEvery ends the bans of e in every jail that holds one, as
// fail2ban's unbanip does.
func (a *adminBackend) LiftEvery(ctx context.Context, e guard.Entry) ([]wire.Ban, error) {
	key := guard.BanKey(banKey(e))
	bans, err := a.Bans(ctx)
	if err != nil {
		return nil, err
	}
	var lifted []wire.Ban
	for _, b := range bans {
		if b.Key != key {
			continue
		}
		switch err := a.Lift(ctx, b.Jail, e); {
		case errors.Is(err, admin.ErrNotFound): // lapsed meanwhile
		case err != nil:
			return lifted, err
		default:
			lifted = append(lifted, b)
		}
	}
	if len(lifted) == 0 {
		return nil, fmt.Errorf("no ban of %s in any jail: %w", e, admin.ErrNotFound)
	}
	return lifted, nil
}

// Jails lists the jails of the configuration in force, the manual jail
// first, with the bans each holds and what they refused, the bans each
// made since the service started and the strikes it lost.
func (a *adminBackend) Jails(ctx context.Context) ([]admin.JailView, error) {
	bans, err := a.Bans(ctx)
	if err != nil {
		return nil, err
	}
	st := a.state()
	lost := map[string]map[string]uint64{}
	for _, j := range a.m.strikesLostByJail() {
		lost[j.Name] = j.StrikesLost
	}
	out := []admin.JailView{{Name: ManualJail}}
	for _, jc := range st.cfg.Guard.Jails {
		c := st.jails[jc.Name].Config()
		out = append(out, admin.JailView{Name: jc.Name, Rules: jc.Rules, MaxFailures: c.MaxFailures, FindTime: c.FindTime.String(),
			BanTime: c.BanTime.String(), MaxBanTime: c.MaxBanTime.String(), Growth: c.Growth, Jitter: max(c.Jitter, 0)})
	}
	for i := range out {
		j := &out[i]
		j.BansMade, j.StrikesLost = uint64(counterValue(a.m.bans.WithLabelValues(j.Name))), lost[j.Name]
		for _, b := range bans {
			if b.Jail == j.Name {
				j.Bans++
				j.Refused += b.Refused
			}
		}
	}
	return out, nil
}

// banKey returns the key a jail bans e under: its network, or its key.
func banKey(e guard.Entry) string {
	if k, ok := e.Key(); ok {
		return k
	}
	return e.String()
}

// List returns the entries of the allow or deny list: networks, then
// keys.
func (a *adminBackend) List(name string) ([]guard.Entry, error) {
	l, err := a.state().list(name)
	if err != nil {
		return nil, err
	}
	return l.Entries(), nil
}

// Add adds e to the allow or deny list (see edit).
func (a *adminBackend) Add(name string, e guard.Entry) error {
	return a.edit(listEdit{list: name, entry: e, add: true})
}

// Remove removes e from the allow or deny list (see edit).
func (a *adminBackend) Remove(name string, e guard.Entry) error {
	return a.edit(listEdit{list: name, entry: e})
}

// edit makes e. Edits apply at once and are replayed onto the lists of
// every configuration a reload builds, until the process restarts: put
// lasting entries in the file. At most maxEdits entries are kept edited.
func (a *adminBackend) edit(e listEdit) error {
	a.reload.Lock() // a reload meanwhile would build lists without it
	defer a.reload.Unlock()
	st := a.state()
	if _, err := st.list(e.list); err != nil {
		return err
	}
	if err := a.edits.room(e); err != nil {
		return err
	}
	if err := st.apply(e); err != nil {
		return err
	}
	a.edits.record(e)
	return nil
}

// Denials lists the latest denials of the rules, newest first.
func (a *adminBackend) Denials() []admin.Denial {
	ds := a.denials.list()
	out := make([]admin.Denial, len(ds))
	for i, d := range ds {
		out[i] = admin.Denial{Time: d.Time, Rule: d.Rule, Key: d.Key, RetryAfter: wire.Seconds(d.RetryAfter)}
	}
	return out
}

// Live returns the snapshot of the latest sample with the rates of the
// last minutes; nil when the admin API is off.
func (a *adminBackend) Live(ctx context.Context) *admin.Snapshot {
	if a.live == nil {
		return nil
	}
	return a.live.current(ctx)
}

// Feed returns the feed of the dashboard's snapshots; nil when the admin
// API is off.
func (a *adminBackend) Feed() *admin.Feed {
	if a.live == nil {
		return nil
	}
	return a.live.feed
}

// Audit returns the audit trail's entries with Seq above after and Time
// not before since, oldest first, at most limit.
func (a *adminBackend) Audit(after uint64, since time.Time, limit int) notify.Page {
	return a.notes.Audit(after, since, limit)
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

// maxEdits bounds the list edits the admin API keeps for reloads.
const maxEdits = 10_000

// A listEdit is an admin's change to the allow or deny list.
type listEdit struct {
	list  string
	entry guard.Entry
	add   bool // else a removal
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
