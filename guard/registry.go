package guard

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// A Ban keeps an actor out until a time.
type Ban struct {
	// Jail is the name of the jail that holds the ban.
	Jail string
	// Key is the banned actor: an address, a network, a hashed username.
	Key string
	// Reason says why, for the admin ("5 failed logins in 10m0s").
	Reason string
	// Since is when the ban started; Until when it lapses.
	Since, Until time.Time
	// Offences is how many times the actor was banned within the jail's
	// memory, this ban included: the ban's length grows with it.
	Offences int
}

// A Registry lists bans for admins: who is banned, why, until when. The
// bans themselves live in the sluice Store, which every process shares,
// and are enforced from there; the Registry holds what a Store cannot
// (reasons, and a list to enumerate). A Jail writes to it when it bans and
// lifts, and reads it to list.
//
// Implementations must be safe for concurrent use. MemoryRegistry keeps
// the list in the process; a fleet that wants one list shares a Registry
// (a Redis hash, a database table) written by every process.
type Registry interface {
	// Put records b, replacing any ban of the same jail and key.
	Put(ctx context.Context, b Ban) error
	// Delete forgets the ban of key in jail, if any.
	Delete(ctx context.Context, jail, key string) error
	// List returns the bans that have not lapsed by now.
	List(ctx context.Context, now time.Time) ([]Ban, error)
}

// A MemoryRegistry is a Registry in the process's memory. Lapsed bans are
// dropped as it lists. The zero value is empty and ready to use; it is
// safe for concurrent use.
type MemoryRegistry struct {
	mu   sync.Mutex
	bans map[[2]string]Ban
}

var _ Registry = (*MemoryRegistry)(nil)

// Put records b.
func (m *MemoryRegistry) Put(_ context.Context, b Ban) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bans == nil {
		m.bans = map[[2]string]Ban{}
	}
	m.bans[[2]string{b.Jail, b.Key}] = b
	return nil
}

// Delete forgets a ban.
func (m *MemoryRegistry) Delete(_ context.Context, jail, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.bans, [2]string{jail, key})
	return nil
}

// List returns the bans in force at now, by jail and key.
func (m *MemoryRegistry) List(_ context.Context, now time.Time) ([]Ban, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Ban
	for k, b := range m.bans {
		if !b.Until.After(now) {
			delete(m.bans, k)
			continue
		}
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b Ban) int {
		if c := strings.Compare(a.Jail, b.Jail); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out, nil
}
