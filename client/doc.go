// Package client is the Go client of sluice serve: it asks the service
// whether a key may act under one of its named rules ([Client.Check],
// [Client.CheckN], [Client.Peek], [Client.CheckMany]), forgets a key's
// state ([Client.Reset]), counts without checking ([Client.Insert]),
// reports outcomes after the fact ([Client.Reserve], [Client.Commit],
// [Client.Refund], [Client.Report]), runs the service's login rules
// ([Client.LoginBegin], [Client.LoginFail], [Client.LoginSucceed]) and
// concurrency rules ([Client.Acquire], [Client.Release],
// [Client.Extend]), and
// manages bans ([Client.Ban], [Client.Bans], [Client.Lift]), and
// decides locally under a share of a rule's limit ([Client.Quota]).
//
//	c, err := client.New(client.Config{URL: "http://127.0.0.1:8080"})
//	...
//	d, err := c.Check(ctx, "login", "203.0.113.7")
//	if !d.Allowed {
//		// refuse; retry after d.RetryAfter
//	}
//
// # Dependencies
//
// The client imports the core (package sluice), the wire types (package
// wire) and the gRPC runtime with Envoy's rate limit protobuf: none of
// the server, its configuration, Prometheus, YAML or OpenTelemetry, so
// that a program that only asks the service carries none of it
// (TestDependencies keeps it so).
//
// # Transports
//
// Checks go over the HTTP JSON API (served by package server/httpapi;
// the client sends and reads the service's own types, package wire) at
// Config.URL, or, with Config.GRPC, over
// Envoy's rate limit gRPC API (package server/envoyrls), asking for the
// named rule as a domain with one descriptor whose value is the key, as
// the service's rules engine reads it. Envoy's protobuf has no field for
// the wait of a denial: sluice serve sends it in the response metadata
// wire.RetryAfterKey, to the millisecond, and the client reads it there
// (or, from another server of Envoy's API, in the Retry-After header
// field it asks Envoy to add, in whole seconds), so that Decision and
// the denial cache are the same over both transports. It has no reset
// and no batches: Reset
// always uses Config.URL, and CheckMany makes one call per check over
// gRPC. The ban operations use the admin API at Config.AdminURL, with
// Config.AdminToken. A Client keeps one http.Client (whose Transport
// keeps up to 64 idle connections) and one grpc.ClientConn, and reuses
// their connections for every call.
//
// # Denial cache
//
// A denial says when the key may pass again (retry_after). The client
// remembers it until then, keyed by rule and key: a check of the same or
// a larger cost, or a peek, is denied from the cache without a round
// trip, which is most checks of a hot key under attack. [Stats] counts
// the round trips and the cache hits. The cache holds at most
// Config.CacheSize denials (evicting with the CLOCK algorithm, expired
// ones first) of keys of bounded length (longer ones are hashed), so a
// flood of distinct denied keys cannot grow it. Denials without a wait
// (the deny list) are not cached.
//
// The cache trades freshness for round trips: a denial is believed until
// its retry_after even if the key's state is reset, or its ban lifted,
// meanwhile by another client. This client's own Reset and Lift forget
// what they undo. Otherwise a cached denial never outlasts the
// service's: the service rounds waits up (to the millisecond over HTTP,
// to whole seconds over gRPC), so the client caches a denial for one
// unit less than its wait, and not at all for a wait of one unit or
// less. Over gRPC, a limit whose denials wait less than a second (100/s)
// gains nothing from the cache.
//
// # Failures
//
// Over the limit is a Decision with Allowed false, never an error. When
// the service does not decide (it is unreachable, does not answer before
// the deadline — the context's, or Config.Timeout — or its store failed)
// the error wraps [ErrUnavailable], which wraps sluice.ErrStore, and the
// Decision that comes with it is the failure policy's: allowed under
// [sluice.FailOpen] (the default), denied with RetryAfter
// Config.FailRetryAfter under [sluice.FailClosed]. A caller may act on the Decision and log the
// error. A request the service refuses (an unknown rule, a cost above
// the rule's burst) wraps sluice.ErrInvalidRequest, with a denying
// Decision.
//
// # Local quotas
//
// A [Quota] decides the requests of one bucket of the service's quota
// section in this process, under a share of the bucket's rule that the
// service assigns it and re-balances among the holders by their demand
// (as it does for Envoys over the Rate Limit Quota Service; see
// docs/service.md): [Quota.Report] tells the service what it decided
// and renews the share, [Quota.Run] reports every interval, and
// [Quota.Decide] decides a request locally, with no call to the service,
// while a share is in force (a token bucket of the share), else per
// request with CheckN of the configured rule and key. One call per
// report interval, whatever the number of decisions.
//
//	q, err := c.Quota(client.QuotaConfig{Domain: "edge", Bucket: map[string]string{"name": "api"},
//		Holder: hostname, Rule: "api", Key: "name=api"})
//	go q.Run(ctx, time.Second)
//	d, err := q.Decide(ctx, time.Now())
//
// # In net/http middleware
//
// [Client.Rule] returns one of the service's rules as an
// httplimit.Decider, so that httplimit's middleware can decide with the
// shared service instead of an in-process sluice.Limiter: the
// application switches by configuration, setting Rule.Decider instead of
// Rule.Limiter. The middleware's own failure policy (its
// Config.Failure) then applies to ErrUnavailable.
package client
