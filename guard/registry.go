package guard

import (
	"context"
	"fmt"
	"time"
)

// A Ban keeps an actor out until a time.
type Ban struct {
	// Jail is the name of the jail that holds the ban.
	Jail string
	// Key is the banned actor: an address or a network ("203.0.113.7",
	// "198.51.100.0/24", "2001:db8::/64"), which bans every address in
	// it, or any other key (a hashed username, an API key).
	Key string
	// Reason says why, for the admin ("5 failed logins in 10m0s").
	Reason string
	// Since is when the ban started; Until when it lapses.
	Since, Until time.Time
	// Offences is how many times the actor was banned within the jail's
	// memory, this ban included: the ban's length grows with it.
	Offences int
	// Collateral is, for a network ban a BanSet made by merging bans at
	// capacity, how much it covers beyond the bans merged into it: in
	// addresses for IPv4, in /64s for IPv6 (an offender's /64 counts as
	// its own, a /64 being one customer's). Zero for a ban of just what
	// was banned.
	Collateral int64
}

// CollateralUnit names what b.Collateral counts: "addresses" for an
// IPv4 network, "/64s" for an IPv6 one, "" for a key.
func (b Ban) CollateralUnit() string {
	p, ok := parseNet(b.Key)
	switch {
	case !ok:
		return ""
	case p.Addr().Is4():
		return "addresses"
	}
	return "/64s"
}

// A Registry keeps the bans of jails, apart from rate states: no
// eviction, no key flood and no full store can lift a ban. Each process
// enforces the bans from its Bans, a set in its own memory kept up to
// date by the Registry (a lookup costs no round trip and cannot fail);
// a Registry shared by a fleet (guard/redisbans, guard/memcachedbans)
// also writes every ban to a shared store, and brings the bans of other
// processes into each process's set.
//
// Implementations must be safe for concurrent use.
type Registry interface {
	// Put records b, replacing any ban of the same jail and key, and
	// returns the ban as recorded (see BanSet.Put).
	Put(ctx context.Context, b Ban) (Ban, error)
	// Delete lifts the ban of key in jail; the error wraps ErrNotBanned
	// when there is none.
	Delete(ctx context.Context, jail, key string) error
	// List returns the bans that have not lapsed by now, by jail and key.
	List(ctx context.Context, now time.Time) ([]Ban, error)
	// Bans returns the set the process enforces from.
	Bans() *BanSet
}

// A MemoryRegistry is a Registry in the process's memory: a BanSet, and
// nothing shared. Processes that share a store but want one list of bans
// share a Registry instead (guard/redisbans, guard/memcachedbans).
//
// The zero value is empty and ready to use, with the default capacity;
// it is safe for concurrent use.
type MemoryRegistry struct {
	set BanSet
}

var _ Registry = (*MemoryRegistry)(nil)

// NewMemoryRegistry returns a MemoryRegistry whose set has the limits l.
func NewMemoryRegistry(l BanLimits) *MemoryRegistry {
	return &MemoryRegistry{set: BanSet{BanLimits: l}}
}

// Put records b.
func (m *MemoryRegistry) Put(_ context.Context, b Ban) (Ban, error) {
	return m.set.Put(b, time.Time{})
}

// Delete lifts a ban.
func (m *MemoryRegistry) Delete(_ context.Context, jail, key string) error {
	if !m.set.Delete(jail, key) {
		return fmt.Errorf("%w: %q in jail %q", ErrNotBanned, key, jail)
	}
	return nil
}

// List returns the bans in force at now, by jail and key.
func (m *MemoryRegistry) List(_ context.Context, now time.Time) ([]Ban, error) {
	return m.set.List(now), nil
}

// Bans returns the registry's set.
func (m *MemoryRegistry) Bans() *BanSet { return &m.set }

// InForce returns the bans in force at now, in no order: List without
// its sort, for a reader that orders them its own way.
func (m *MemoryRegistry) InForce(now time.Time) []Ban { return m.set.InForce(now) }
