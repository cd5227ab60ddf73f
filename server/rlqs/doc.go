// Package rlqs serves quotas at the edge: Envoy's Rate Limit Quota
// Service (envoy.service.rate_limit_quota.v3.RateLimitQuotaService, the
// server of Envoy's rate_limit_quota filter) on sluice serve's gRPC
// listener, and the same quotas over HTTP (POST /v1/quota) for other
// clients. An edge decides each request locally, under a share of a
// rule's limit that the service assigns it, and reports what it decided;
// the service divides the rule's limit among the edges by their demand
// (max-min fair, sluice.QuotaStore), in the rule's store, so that the
// replicas of the service on one Redis divide one limit.
//
// # Buckets and rules
//
// The quota section of the configuration maps a bucket (a domain, and
// entries its BucketId must have) to a named rule and, optionally, to the
// entry that names its actor for the guard. The first configured bucket
// that matches a report wins. The rule's first limit is divided; a
// reload takes effect at the next report of each bucket.
//
// # The protocol, as the service follows it
//
//   - A stream's first report names its domain; a report without one
//     before it, or a report of another domain later, ends the stream
//     with InvalidArgument.
//   - The first report of a bucket id subscribes the stream to it (its
//     demand unknown, or, for a stream named by ClientHeader, the demand
//     the store holds for that name: a reconnecting edge); every
//     report of it is answered in one response carrying one action per
//     bucket reported. Ids are compared as maps: the order of entries
//     does not matter. An id with no entry or an empty key or value ends
//     the stream with InvalidArgument.
//   - An assignment is a QuotaAssignmentAction with an
//     assignment_time_to_live of the section's ttl and a RateLimitStrategy:
//     a token bucket of the edge's share (tokens_per_fill per the limit's
//     period, max_tokens the share of the section's burst, at least 2),
//     which is what Envoy's filter applies; or a blanket rule.
//   - The reports' allowed counts are inserted into the rule's state, as
//     if the rule had decided them (so per-request checks of the same
//     rule see them), and both counts go to the metrics.
//   - A bucket that reports no request for the section's idle time is
//     abandoned (AbandonAction) and its share given back at once; an
//     edge that still uses it subscribes again by its next report.
//   - A stream that sends nothing for the idle time is ended with
//     DeadlineExceeded; a stream that ends keeps its shares until their
//     TTL (the edge may still apply them), unless its edge reconnects
//     under the same name (ClientHeader), which takes them back at once.
//
// # Blanket rules
//
// A bucket gets DENY_ALL, living one TTL, when: no configured bucket
// matches (ALLOW_ALL instead with quota.allow_unknown); the stream holds
// quota.max_buckets ids already (overflow); the id is over
// config.MaxBucketEntries or config.MaxBucketBytes (oversize); the key's
// table holds sluice.MaxQuotaHolders other holders (full); the others
// hold the whole limit, reserve included, for now (no-share: more
// newcomers within one report interval than the reserve serves, see
// Newcomers); the guard refuses or bans the bucket's actor (deny-list,
// banned; an allow-listed actor gets ALLOW_ALL); the store fails under a
// closed failure policy (store; an open one gets ALLOW_ALL, a local one
// the edge's last share, else a share of limit/failure.instances from
// this process). A blanket is never a share: it takes nothing from the
// other edges.
//
// # Newcomers
//
// The edges that hold a share leave quota.reserve of the limit free (the
// water level divides the rest), and an edge that holds none may take
// half of what is free: a new edge's first answer is a share even while
// the others want more than the limit, the next newcomer's half of what
// is left, and so on, rather than a DENY_ALL until the others report
// again. The others shrink to the new level at their next reports, so a
// newcomer has its fair share from its second report on, and the reserve
// is free again. The shares still sum to at most the limit; while the
// edges' demands exceed it, they admit that part less of it. A reserve
// of 0 keeps none: a newcomer to a bucket whose limit the others hold
// whole is answered DENY_ALL until they report again.
//
// A message that is not a usage report ends the stream with Internal
// (gRPC's own decoding), one over the server's message size with
// ResourceExhausted.
//
// # Memory
//
// A stream holds at most quota.max_buckets bucket ids of at most
// config.MaxBucketBytes each, and all the streams of a replica at most
// MaxHeld (beyond, overflow); untracked ids (overflow, oversize, unknown)
// are answered and forgotten. One message is read at a time, and the
// gRPC server of envoyrls.NewServer bounds a message's size and the
// streams of a connection. Metrics are
// labelled by configured bucket names only (unknown ones as "-").
package rlqs
