package rules

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// override returns the rule of a descriptor whose limit the client set
// (Envoy's limit override): no shadow, no name, the descriptor's entries
// taken literally as the state key. The rule of each limit is built
// once, as long as the domain keeps no more than maxOverrides of them.
func (e *Engine) override(d *domain, desc *Descriptor) (*Rule, []byte, error) {
	o := e.overrides[d]
	key := entriesKey(desc.entries(), make([]byte, 0, 64))
	if ru := (*o.rules.Load())[*desc.Override]; ru != nil {
		return ru, key, nil
	}
	l := *desc.Override
	if err := l.Validate(); err != nil {
		return nil, nil, err
	}
	return o.add(l), key, nil
}

// maxOverrides bounds the override rules a domain keeps: Envoy sends
// the few limits of its routes, while the limits of the /json API are
// the client's, unbounded. Overrides past the bound build a rule per
// request.
const maxOverrides = 64

// overrides are the rules of a domain's limit overrides, by limit.
type overrides struct {
	id, domain, prefix string
	store              sluice.Store
	mu                 sync.Mutex // serializes adds
	rules              atomic.Pointer[map[sluice.Limit]*Rule]
}

// newOverrides returns the override rules of d, none yet, and asks
// StoreFor their store now: every override of a domain shares one.
func (e *Engine) newOverrides(d *domain) *overrides {
	o := &overrides{id: d.name + ".override", domain: d.name, prefix: d.prefix}
	if d.named != nil {
		o.prefix = d.named.prefix
	}
	// One ID for every override of the domain: IDs label metrics, and
	// the entries are the client's, unbounded.
	o.store = e.storeFor(o.rule(sluice.Limit{}))
	o.rules.Store(&map[sluice.Limit]*Rule{})
	return o
}

// rule builds the rule of limit l.
func (o *overrides) rule(l sluice.Limit) *Rule {
	ru := newRule(o.id, "", o.domain, o.prefix, config.RateLimit{Limits: []sluice.Limit{l}}, false, false)
	ru.store = o.store
	return ru
}

// add returns the rule of l, kept for the requests to come if there is
// room.
func (o *overrides) add(l sluice.Limit) *Rule {
	o.mu.Lock()
	defer o.mu.Unlock()
	old := *o.rules.Load()
	if ru := old[l]; ru != nil {
		return ru
	}
	ru := o.rule(l)
	if len(old) < maxOverrides {
		m := make(map[sluice.Limit]*Rule, len(old)+1)
		maps.Copy(m, old)
		m[l] = ru
		o.rules.Store(&m)
	}
	return ru
}
