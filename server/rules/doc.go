// Package rules is the decision engine of sluice serve: it turns a
// configuration (named rules and Envoy-style descriptor domains, see
// package config) into decisions for the descriptors of a request, so
// that every API of the service — Envoy's RLS gRPC, the HTTP JSON API,
// forward-auth — decides alike.
//
// # Asking
//
// Build one [Engine] per configuration with [New], then ask it:
//
//	res, err := eng.Check(ctx, rules.Request{
//		Domain: "edge",
//		Descriptors: []rules.Descriptor{
//			{Entries: []rules.Entry{{Key: "remote_address", Value: ip}}},
//			{Entries: []rules.Entry{{Key: "path", Value: "/login"}, {Key: "remote_address", Value: ip}}},
//		},
//	})
//
// A named rule is asked with one descriptor built by [Key]:
//
//	res, err := eng.Check(ctx, rules.Request{Domain: "login", Descriptors: []rules.Descriptor{rules.Key(ip)}})
//
// res.Allowed is the overall answer; res.Statuses has one [Status] per
// descriptor: the [Rule] that applied (nil when none), its
// [sluice.Decision], and whether a shadow rule would have denied.
// [Rule.SetHeaders] writes the IETF RateLimit fields of a decision.
//
// # Semantics
//
// Matching is envoyproxy/ratelimit's (see [config.Domain]): most
// specific match per level (key and value, then wildcard, then key
// alone), and a descriptor applies only the rule at its own depth. A
// descriptor that matches no rule is allowed and counts nothing; a
// request for an unknown domain is an error ([ErrUnknownDomain]), which
// the Envoy API answers as Envoy does (OK, no limits) and the HTTP API
// refuses. The overall answer is Envoy's: denied when any enforced
// descriptor is over its limit, or when every quota descriptor is.
// Unlike Envoy, a request denied as a whole takes nothing: the allowed
// descriptors' takes are refunded.
//
// # Guard
//
// An Engine built with a guard.Guard (sluice serve's allow and deny
// lists and jails) asks it about the actor of each descriptor of a named
// rule before the rule's limits: the value of its one entry is the key,
// and [Request.Client] (or the key, when it is an address) the address.
// The Guard applies its one order (allow list, deny list, bans; see
// guard.Guard): it may exempt the actor (allowed, nothing counted),
// refuse it, or refuse it as banned until a time; [Status.Guard] says
// which, and shadow mode does not soften it. Each take the limits of a
// named rule deny is a strike in the jails that count the rule, under
// the actor's key (an IPv6 address under its network). Descriptor
// domains have no actor: the Guard is not asked about them. Every API
// of sluice serve asks the Engine, so the guard is applied once, in one
// place, and alike on every one.
//
// # State keys
//
// A named rule keeps its states under "namespace:rule:" + actor, as a
// [sluice.Limiter] with that Action does, so the two share state. A
// descriptor keeps its state under "namespace:@domain:" + its entries
// ("path=/login,remote_address=203.0.113.7", escaped), hashed when longer
// than [sluice.MaxActorLen]. The limit's [sluice.Limit.StateID] completes
// the key in every store, so editing a rate keeps the counters and a
// reload with the same rules changes nothing.
package rules
