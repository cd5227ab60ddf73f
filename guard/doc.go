// Package guard is abuse policy above rate limits: allow and deny lists,
// jails that ban actors who fail too often, a login-protection construct,
// and export of bans to firewalls and edge proxies.
//
// # Lists
//
// A [List] holds networks (CIDR prefixes) and keys, each an [Entry];
// lookups are lock-free and edits take effect at once. [ParseEntry] reads
// entries as operators write them, in configuration files and admin
// requests alike: an address, a network, or "key:" and a key. [Middleware] checks the client's address
// against an allow list (whose requests skip every limit) and a deny list
// before any limit.
//
// # Jails
//
// A [Jail] is fail2ban for applications: MaxFailures failures within
// FindTime ban the actor for BanTime, longer for each earlier offence,
// with jitter. Failures, bans and offences are states in the sluice Store
// (a ban is a token bucket emptied for the ban's length), so every process
// sharing the store counts the same failures and enforces the same bans,
// and a lapsed ban costs no memory. A [Registry] lists the bans with
// reason, expiry and offence count; [Jail.Lift] ends one by hand; the
// OnBan and OnLift hooks tell an admin, and an [ExpiryWatcher] tells of
// the bans that lapse, once per fleet with a Registry that is an
// [ExpiryClaimer]. Package guard/notify turns these into webhooks,
// commands and an audit trail.
//
// # Logins
//
// A [Login] protects a login form as one construct: failures counted per
// address and username, per address, per username and globally, reserved
// before the password check and given back on success; known-good
// addresses per account (the last few it logged in from) that get through
// while the account is under attack; a progressive delay instead of a lockout; a CAPTCHA signal; an
// OnAttack hook; and decisions that never depend on whether an account
// exists, so they leak no usernames.
//
// # Export
//
// [Export] writes the current bans of addresses and networks as an
// nftables script, an ipset or iptables-restore script, a hosts.deny
// fragment, a pf table or an nginx geo or map include, for a cron job or
// the CLI to apply.
package guard
