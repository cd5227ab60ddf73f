// Package server is sluice serve without its listeners: a [Service]
// builds a configuration (package config) into rules, a guard and APIs
// over one store, serves them, and swaps them on reload while the store,
// and so every counter and ban, stays.
//
// # The path of a request
//
// A request reads top to bottom:
//
//  1. a listener: HTTP ([Service.Handler]) or gRPC
//     (envoyrls.NewServer over [Service.RateLimitService]);
//  2. the API that decodes it: the HTTP JSON API (package
//     server/httpapi, POST /v1/check, /v1/reset, /v1/insert and the
//     outcome calls), forward-auth
//     (package server/forwardauth, GET /v1/auth), or Envoy's rate limit
//     API (package server/envoyrls: gRPC and POST /json);
//  3. the rules engine of the configuration in force (package
//     server/rules): it matches the request to its rules, applies the
//     guard (allow list, deny list, bans; see guard.Guard) to the actor
//     of a named rule, and decides;
//  4. the rule's own store: when the configuration was built, each named
//     rule and each domain got the store of its failure policy (open,
//     local or closed, over Redis or memcached; the memory store cannot
//     fail) wrapped with its metrics. No layer works out again what
//     another already knew.
//
// Bans live in a ban registry beside the store (guard.BanSet in each
// process; on Redis shared by the fleet, package guard/redisbans), never
// in the rate states, so that no key flood, eviction or full store lifts
// one.
//
// # Other endpoints
//
//	GET /healthz   the process serves
//	GET /readyz    the store answers a peek within two seconds
//	GET /metrics   Prometheus metrics (decisions by rule, guard verdicts,
//	               bans, store failures, breakers, HTTP requests)
//
// and, on its own listener when the configuration sets an admin token,
// the admin API and dashboard (package server/admin) at /admin/, over
// what [Service.Admin] returns.
//
// # What a Service is made of
//
// A Service is the composition root: it opens the stores, builds each
// configuration, swaps it in on reload, routes the requests and closes
// it all. What it builds is held by parts that receive what they need:
// the engine, the guard and the APIs of the configuration in force; the
// admin API's view of them (the rules, bans, lists and denials); the
// dashboard's live series; and the ban notifications (package
// server/bannotify: the audit trail, the webhooks and commands, and the
// watch for lapsed bans).
//
// # Logs
//
// A flood of requests cannot flood the logs: every line of the service
// passes a throttle of a few lines a second per message and rule, and
// the lines that pass after some were left out say how many.
package server
