// Package memcachedbans keeps guard's ban registry in memcached, for a
// fleet whose limits live in memcached: every process enforces every
// ban, whoever made it, lists the same bans and can lift any of them,
// and a process started later, or again, enforces every ban in force as
// soon as New returns.
//
// Memcached evicts (LRU) and cannot enumerate keys, so the bans live in a
// fixed number of pages (Config.Pages items, "Prefix:page:N", spread over
// the servers), each holding the bans, and the lifts, of the jails and
// keys that hash to it. Each process holds a replica of every ban in a
// [guard.BanSet] and enforces from it without a round trip. It writes its
// changes to their page at once, by compare-and-set, and polls the
// pages' CAS tokens every Config.PollEvery (one multi-get per server),
// reading again the pages that changed.
//
//	bans, err := memcachedbans.New(ctx, memcachedbans.Config{Addrs: []string{"10.0.0.7:11211"}})
//	...
//	defer bans.Close()
//	jail, err := guard.NewJail(store, guard.JailConfig{Name: "login", Registry: bans})
//
// # Eviction
//
// Pages are stored without an expiry, and read every second by every
// process, which keeps them at the hot end of memcached's LRU; a key
// flood may evict them all the same. A process that finds a page missing,
// or lacking an entry it knows, writes back the page merged with what it
// knows (see [Registry], "Merging"): a ban is lost only if memcached
// evicts it and every process that held it stops. Run memcached with -M
// (no eviction; writes fail when full) or enough memory to avoid even
// that window.
//
// # Placement
//
// Page N lives on server N modulo the number of servers, in the sorted
// order of their addresses. Adding or removing a server moves pages:
// the processes write them to their new servers from their replicas;
// the old copies stay until evicted, and would come back, stale but
// merged by stamp, if the server were removed and added again.
package memcachedbans
