// Package envoyrls serves Envoy's rate limit service API, v3
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit), from a
// [rules.Engine], so that Envoy, Istio, Contour and Gloo can use sluice
// in place of envoyproxy/ratelimit with the same configuration files.
//
// # Mapping
//
// A RateLimitRequest is one [rules.Request]: its domain, its descriptors
// (entries in order), and hits_addend as the cost of each descriptor (0
// means 1). A descriptor's own hits_addend overrides it; 0 there asks
// without taking, as in Envoy. A descriptor's limit override applies
// that limit (a fixed window of the given unit) instead of the
// configuration's.
//
// The response has one status per descriptor: OVER_LIMIT when its rule
// denies (never for a shadow rule), current_limit (the binding limit, in
// Envoy's units with a unit multiplier for periods such as 5 minutes),
// limit_remaining, and duration_until_reset rounded up to whole seconds.
// A descriptor that matches no rule is OK without a current limit; an
// unlimited one is OK with limit_remaining 4294967295. The overall code
// is OVER_LIMIT when a descriptor of an enforced rule is over its limit,
// or every quota descriptor is.
//
// The engine's guard (sluice serve's allow and deny lists and jails, see
// guard.Guard) judges the key of a named rule's descriptor: an
// allow-listed key is OK with limit_remaining 4294967295 and counts
// nothing; a deny-listed one is OVER_LIMIT without duration_until_reset;
// a banned one is OVER_LIMIT with the ban's remaining time as
// duration_until_reset (and Retry-After).
//
// With [Config.ResponseHeaders], the response asks Envoy to add the IETF
// RateLimit fields of the descriptor closest to its limit to the
// client's response (RateLimit-Policy, RateLimit, and Retry-After when
// the request is denied).
//
// Every OVER_LIMIT answer but a deny list's carries its wait, in
// seconds rounded up to the millisecond, in the response metadata
// [wire.RetryAfterKey] (sluice-retry-after), for sluice's clients: the
// protobuf has no field for it. Envoy ignores it.
//
// # Errors
//
// A domain the configuration does not know is answered OK with no
// limits, as envoyproxy/ratelimit answers it. A request without a
// domain or descriptors, with an empty descriptor, with negative hits,
// or with more descriptors than the engine allows
// ([rules.DefaultMaxDescriptors] by default) fails with InvalidArgument
// at once; [NewServer] also bounds messages to [DefaultMaxMessageBytes].
// A store failure is Unavailable, which Envoy's failure_mode_deny
// setting turns into an admission (the default) or a denial.
package envoyrls
