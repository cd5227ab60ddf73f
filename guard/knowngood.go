package guard

import (
	"context"
	"net/netip"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// DefaultKnownGoodAddrs is how many addresses per account stay known-good
// when LoginConfig.KnownGoodAddrs is zero.
const DefaultKnownGoodAddrs = 5

// knownGood remembers, per account, the addresses that logged in to it
// successfully within a period: the last max of them, least recently
// used out first. It lives in the sluice Store as flags, so every process
// sharing the store agrees, and needs nothing of a store but Decide.
//
// Each success flags the account and address for the period; the flag's
// end (by the store's clock) marks the success. The account keeps max
// slots, each flagged with the end of one address's last success: a
// success from an address already in the set renews its slot, one from a
// new address takes a free slot or evicts the oldest, and the evicted
// end becomes the account's floor. In LRU order each eviction's end is
// later than the last, so an address is in the set exactly when its flag
// ends after the floor: a check costs two peeks. Ends are compared to
// the second (flags round up to whole seconds), so an address whose last
// success came within a second of an evicted one's is evicted with it;
// and two successes on one account at the same moment may both take the
// oldest slot, keeping one address more than max until later successes
// evict it.
type knownGood struct {
	addr   *flag // per account and address: set for period by each success
	slot   *flag // per account and slot: the end of the slot's address
	floor  *flag // per account: the end of the last evicted address
	max    int   // ≤ 0: no cap, and no slots
	period time.Duration
}

func newKnownGood(store sluice.Store, namespace string, clock func() time.Time, max int, period time.Duration) (*knownGood, error) {
	k := &knownGood{max: max, period: period}
	var err error
	// An address's flag grants the privilege; a slot's or the floor's
	// set later than it was only makes fewer addresses known-good.
	if k.addr, err = newFlag(store, namespace, "login-known", clock, true); err != nil {
		return nil, err
	}
	if k.slot, err = newFlag(store, namespace, "login-known-slot", clock, false); err != nil {
		return nil, err
	}
	if k.floor, err = newFlag(store, namespace, "login-known-floor", clock, false); err != nil {
		return nil, err
	}
	return k, nil
}

func addrKey(user string, ip netip.Addr) string { return user + "|" + ip.String() }

// contains reports whether ip is one of user's known-good addresses.
func (k *knownGood) contains(ctx context.Context, user string, ip netip.Addr) (bool, error) {
	end, ok, err := k.addr.end(ctx, addrKey(user, ip))
	if err != nil || !ok || k.max <= 0 {
		return ok, err
	}
	floor, evicted, err := k.floor.end(ctx, user)
	if err != nil {
		return false, err
	}
	return !evicted || end.After(floor), nil
}

// add records a success of user from ip: ip joins the known-good set,
// or renews its place in it.
func (k *knownGood) add(ctx context.Context, user string, ip netip.Addr) error {
	key := addrKey(user, ip)
	if k.max <= 0 {
		return k.addr.set(ctx, key, k.period)
	}
	old, inSet, err := k.addr.end(ctx, key)
	if err != nil {
		return err
	}
	floor, evicted, err := k.floor.end(ctx, user)
	if err != nil {
		return err
	}
	inSet = inSet && (!evicted || old.After(floor))
	ends, now, err := k.slotEnds(ctx, user)
	if err != nil {
		return err
	}
	pick, victim := pickSlot(ends, inSet, old)
	// The address first, then its slot: the slot's end is never before
	// the address's, so when the slot is evicted the floor covers it.
	if err := k.addr.set(ctx, key, k.period); err != nil {
		return err
	}
	if err := k.slot.set(ctx, slotKey(user, pick), k.period); err != nil {
		return err
	}
	if victim.IsZero() || (evicted && !victim.After(floor)) {
		return nil
	}
	return k.floor.set(ctx, user, victim.Sub(now))
}

// slotEnds reads the ends of user's slots (zero for a free one), and
// the store's time of the last read: "now" for a new floor, since the
// ends are by the store's clock.
func (k *knownGood) slotEnds(ctx context.Context, user string) ([]time.Time, time.Time, error) {
	ends := make([]time.Time, k.max)
	var now time.Time
	for i := range ends {
		d, err := k.slot.lim.PeekN(ctx, slotKey(user, i), k.slot.depth)
		if err != nil {
			return nil, now, err
		}
		now = d.Time
		if !d.Allowed {
			ends[i] = d.Time.Add(d.RetryAfter)
		}
	}
	return ends, now, nil
}

// pickSlot chooses the slot an address takes: for an address inSet, the
// slot whose end is nearest its old end; else a free slot, or the one
// that ends first, whose end, the victim's, it returns too.
func pickSlot(ends []time.Time, inSet bool, old time.Time) (pick int, victim time.Time) {
	pick = -1
	if inSet {
		for i, e := range ends {
			if !e.IsZero() && (pick < 0 || absDur(e.Sub(old)) < absDur(ends[pick].Sub(old))) {
				pick = i
			}
		}
	}
	if pick >= 0 {
		return pick, time.Time{}
	}
	for i, e := range ends {
		if e.IsZero() {
			return i, time.Time{}
		}
		if pick < 0 || e.Before(ends[pick]) {
			pick, victim = i, e
		}
	}
	return pick, victim
}

func slotKey(user string, i int) string { return user + "|" + strconv.Itoa(i) }

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
