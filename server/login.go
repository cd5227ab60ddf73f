package server

import (
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/server/forwardauth"
)

// buildLogins builds the login rules of c over the service's store under
// its default failure policy, with the state's lists and jails (already
// built): each in a namespace of its own, so that two logins never share
// a count.
func (s *Service) buildLogins(n *state, c *config.Config) (map[string]*guard.Login, error) {
	logins := make(map[string]*guard.Login, len(c.Logins))
	for _, lc := range c.Logins {
		store := &meter{next: s.st.policy(c.Failure.Policy), rm: s.m.rule("login:" + lc.Name), denials: &s.denials, tracer: s.tel.tracer}
		gc := guard.LoginConfig{
			PerIPUser: lc.PerIPUser, PerIP: lc.PerIP, PerUser: lc.PerUser, Global: lc.Global,
			CaptchaAfter: lc.CaptchaAfter, Delay: lc.Delay, MaxDelay: lc.MaxDelay,
			KnownGoodFor: lc.KnownGoodFor, KnownGoodAddrs: lc.KnownGoodAddrs,
			Guard: n.guard, Jail: n.jails[lc.Jail],
			Namespace: s.opts.Namespace + ":login:" + lc.Name, Clock: s.opts.Clock, IPv6Prefix: lc.IPv6Prefix,
		}
		if lc.Secret != "" {
			gc.Secret = []byte(lc.Secret)
		}
		l, err := guard.NewLogin(sluice.Store(store), gc)
		if err != nil {
			return nil, fmt.Errorf("login %q: %w", lc.Name, err)
		}
		logins[lc.Name] = l
	}
	return logins, nil
}

// authLogins returns the logins for forward-auth, with their holds.
func authLogins(c *config.Config, logins map[string]*guard.Login) map[string]forwardauth.Login {
	out := make(map[string]forwardauth.Login, len(logins))
	for _, lc := range c.Logins {
		out[lc.Name] = forwardauth.Login{Login: logins[lc.Name], MaxHold: lc.MaxHold}
	}
	return out
}
