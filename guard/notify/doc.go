// Package notify tells the world of bans: a webhook or a command for
// each ban, lift and expiry, from a bounded queue that never holds up a
// decision, and an audit trail of them all, in the log and in a bounded
// ring in memory.
//
// # Events
//
// An [Event] is a ban, a lift or an expiry of a ban (see package guard:
// Jail.OnBan, Jail.OnLift and the ExpiryWatcher's OnExpire), with the
// ban's jail, key, network, reason, start, end and offence count, the
// process that made it, and an ID kept through retries. In a fleet
// sharing its bans (guard/redisbans, guard/memcachedbans), each event
// is made by one process: a ban by the process that decided it, a lift
// by the one that served it, an expiry by the one that claimed it
// (guard.ExpiryClaimer).
//
// # Sinks
//
// A [Sink] delivers events through a [Deliverer] — a [Webhook] or an
// [Exec] — from a queue of its own: [Sink.Notify] never blocks; a full
// queue drops the event, and every outcome is counted (sent, failed
// attempts, dropped by reason) for metrics. Each event is tried a
// bounded number of times, each attempt bounded in time, with
// exponential backoff and full jitter between them.
//
// # Verifying a webhook's signature
//
// A [Webhook] posts the event as JSON with the headers
//
//	X-Sluice-Event:     ban | lift | expire
//	X-Sluice-Event-Id:  the event's ID (the same on every retry)
//	X-Sluice-Timestamp: Unix seconds when this attempt was signed
//	X-Sluice-Signature: v1=HEX
//
// where HEX is the hex HMAC-SHA256, keyed with the shared secret, of the
// timestamp (as sent, in decimal), a '.', and the raw body — the scheme
// of Stripe's webhooks. To verify, a receiver recomputes it over the raw
// body before parsing it, compares in constant time, and refuses a
// timestamp more than a few minutes from its clock, so that a request
// captured once cannot be replayed later; it may also drop an ID it has
// seen, as retries repeat it. In Go, [Verify] does all but the last; in
// a shell:
//
//	printf '%s.%s' "$TS" "$BODY" | openssl dgst -sha256 -hmac "$SECRET"
//
// # Audit trail
//
// A [Trail] keeps every event it is given, oldest dropped first beyond
// its bounds (counted), and writes each as one log line; sluice serve
// serves it at GET /admin/api/audit. It is apart from the sinks' queues:
// a hung receiver loses nothing from it.
package notify
