// Package httplimit is net/http middleware that rate-limits requests with
// sluice Limiters: who is counted (keys), which requests count
// (predicates and response-based counting), what a denied client is told
// (429, Retry-After, the IETF RateLimit fields, problem details), and what
// a rule does (enforce, dry run, shadow ban).
//
// # Keys
//
// A [Keyer] names the actor of a request. [ClientIP] finds the client's
// address, believing forwarding headers only from configured trusted
// proxies; [IPPrefix] keys by network (/24, /64); [AdaptivePrefix] keys
// an IPv6 client by its /64, or by its /48 once that /48 rotates through
// more /64s than a few; [Header],
// [Path], [Pattern] and [FormField] (hashed, so no usernames sit in the
// store) key by request content; [Compose] combines keys (address and
// username). A request from which no key can be derived is limited under
// one shared key, never let through unlimited.
//
// # Rules
//
// A [Middleware] decides its [Rule]s together: a request goes through
// only if every matching Enforce rule allows it, and a request denied by
// one rule consumes nothing under the others. A rule's Match chooses the
// requests it counts; its Count counts only responses of some statuses
// (401 for failed logins), reserving a unit before the handler runs and
// giving it back after, atomically; its Reset forgets the actor after a
// success. A rule in [DryRun] mode logs whom it would deny; one in
// [Shadow] mode lets denied requests through marked, so the handler can
// skip their side effects ([Shadowed]). Handlers read the decision with
// [OutcomeOf]: always for shadowed and dry-run requests, and for every
// request with Config.AttachOutcome (off by default, since it costs a
// copy of the request).
//
// A rule decides with its Limiter, or with another [Decider]: a rule of
// the shared sluice serve service (client.Rule in package client), so
// that an application moves from in-process limits to the service by
// configuration. The service cannot give a take back: such a rule cannot
// Count, and its take of a request another rule denies stays counted.
//
// # Cost
//
// An allowed request costs one allocation: the key's bytes (for keys that
// implement [KeyAppender], as every address key does), the header values
// and their slices share it, and the handler gets the request as it came.
// A denied one costs the same, its problem details included.
//
// # Responses
//
// Allowed and denied responses carry the RateLimit-Policy and RateLimit
// fields of draft-ietf-httpapi-ratelimit-headers-11 (structured fields:
// `"login";q=10;w=180` and `"login";r=3;t=54`), optionally the legacy
// X-RateLimit-* trio; per rule, Rule.Fields may pick the trio, or the
// forms of drafts -07 and -06, for clients written against them. A denied request gets Retry-After in whole seconds,
// rounded up, and, from the default [ProblemHandler], 429 with an
// application/problem+json body (RFC 9457) naming the violated policy.
// Denials are logged to log/slog.
//
// # Failures
//
// When the store fails, the Config's Failure, a [sluice.FailurePolicy],
// applies ([sluice.FailOpen] by default) and the middleware logs it, at
// most one line a second.
package httplimit
