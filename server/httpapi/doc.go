// Package httpapi is the HTTP JSON API of sluice serve: clients name a
// rule and a key (or a domain and descriptors), and the API answers
// whether that key may act now under the rule's limits, as decided by
// one rules engine (package server/rules), which every API of the
// service shares.
//
// # Endpoints
//
//	POST /v1/check   {"rule":"login","key":"203.0.113.7","cost":1,"peek":false}
//	POST /v1/check   {"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"203.0.113.7"}]}]}
//	POST /v1/check   {"checks":[{...},{...}]}
//	POST /v1/reset   {"rule":"login","key":"203.0.113.7"}
//	POST /v1/reset   {"domain":"edge","descriptors":[...]}
//	POST /v1/insert  {"rule":"login","key":"alice","cost":3}    (-3: a reward)
//	POST /v1/reserve {"rule":"login","key":"alice","id":"req-81"}
//	POST /v1/commit  {"rule":"login","key":"alice","id":"req-81"}
//	POST /v1/refund  {"rule":"login","key":"alice","id":"req-81"}
//	POST /v1/report  {"rule":"login","key":"alice","id":"req-82","outcome":"failure"}
//
// An insert counts cost whether or not it fits and answers whether the
// key may still act. The outcome calls ([wire.OutcomeRequest]) count only what
// turned out badly, each once per request id in every process sharing
// the store: see rules.Engine.Reserve, Settle and Report. An unknown or
// expired reservation's commit or refund is a 409.
//
// Request bodies are JSON objects (Content-Type: application/json) of at
// most [DefaultMaxBodyBytes] by default. Unknown fields are refused, so a
// misspelt "cots" is an error rather than a silent cost of 1.
//
// # Check
//
// A check takes cost units (default 1) from key under every limit of the
// rule, all or nothing; with "peek":true it only reports whether it would.
// The answer is 200 whether the key is allowed or not, with a
// [wire.CheckResponse]:
//
//	{"allowed":false,"rule":"login","limit":5,"policy":"5/min","remaining":0,
//	 "reset_after":59.2,"retry_after":11.2}
//
// limit, policy and remaining describe the limit that binds (for a denial,
// the one with the longest wait; otherwise the one with the fewest
// remaining). reset_after and retry_after are seconds as decimal numbers,
// rounded up to the millisecond so that a client that waits retry_after is
// not denied again for having waited too little; retry_after is 0 when
// allowed.
//
// The response also carries the fields of the IETF RateLimit header draft:
// RateLimit-Policy lists every limit of the rule (`"login-1m";q=5;w=60`),
// RateLimit gives the binding one's remaining units and seconds to reset
// (`"login-1m";r=0;t=60`), and a denial adds Retry-After in whole seconds,
// rounded up. A rule of one limit names its item after the rule; a rule of
// several appends each limit's period.
//
// # Descriptors
//
// A check may name a descriptor domain of the configuration (Envoy's
// format, see package config) and give descriptors instead of a rule and
// a key; they are decided together by the same engine as Envoy's gRPC
// API (package rules): allowed only if no enforced descriptor is over its
// limit, and a denied request takes nothing. The answer's top-level
// fields describe the binding descriptor (the denying one with the
// longest wait, else the one closest to its limit), "rule" being its
// rule's ID ("edge.path_/login.remote_address"), and "statuses" has one
// [wire.DescriptorStatus] per descriptor. A descriptor that matches no rule is
// allowed and counts nothing.
//
// # Batches
//
// {"checks":[...]} asks up to [wire.MaxBatch] checks (of either form)
// in one request; they are decided in order, each on its own, and
// answered as {"results":[...]}, one [wire.CheckResponse] per check. A check
// the client got wrong (an unknown rule, a cost above the burst) is
// answered in its place by a CheckResponse whose "error" says why, its
// other fields zero; a store failure fails the batch with 503. Batch
// answers carry no RateLimit fields.
//
// # Shadow rules
//
// A rule marked shadow (named rules) or shadow_mode (descriptors) is a
// dry run: it counts as usual but never denies, and the answer says
// "shadowed":true when it would have.
//
// # Guard
//
// When the engine has a guard (sluice serve's guard section: allow and
// deny lists, jails), it judges the key of every check of a named rule
// before the rule's limits, in the order of [guard.Guard], as every other
// API of the service does: an allow-listed key (an address in a network
// of the list, or a "key:" entry) is allowed without counting,
// "guard":"allow-list" and no limit fields; a deny-listed one is refused,
// "allowed":false, "guard":"deny-list", without retry_after; a banned key
// (an address in a banned network too) is refused with "guard":"banned"
// and the ban's remaining time as retry_after, reset_after and
// Retry-After; and each take the limits of a rule a jail counts deny is
// a failure in that jail. Descriptor domains have no actor: the guard
// does not apply to them.
//
// # Reset
//
// A reset forgets key's state under every limit of the rule (after a
// successful sign-in, the failures before it no longer count), or the
// states of the rules the descriptors match, and answers 204 No Content.
//
// # Errors
//
// Errors are RFC 9457 problem details, application/problem+json, with an
// "error" member that repeats the detail ([wire.ErrorResponse]), with status
//
//	400  malformed JSON, an unknown field, a missing or unknown rule or
//	     domain, a missing key, no or empty descriptors, more than the
//	     engine's descriptors (rules.DefaultMaxDescriptors) or the
//	     batch's checks, a cost below 0 or above the rule's burst
//	404  no such endpoint
//	405  a method other than POST
//	413  a body larger than the limit
//	415  a body that is not application/json
//	503  the store failed to decide (details go to the log, not the client)
//
// Over the limit is not an error: it is a 200 with "allowed":false.
//
// # OpenAPI
//
// openapi.yaml in this directory is the OpenAPI 3.1 description of the
// service's HTTP API: these endpoints, GET /v1/auth (package
// server/forwardauth), /healthz and /readyz. sluice serve serves it at GET
// /openapi.yaml ([OpenAPIHandler]; [OpenAPI] returns it), for generating
// clients in other languages. The tests of package server check it
// against the handlers, request and answer, for every operation it
// describes; and clients/typescript holds a client generated from it
// (openapi-typescript and openapi-fetch), compiled and run against a real
// sluice serve by the tests of cmd/sluice.
package httpapi
