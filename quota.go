package sluice

import (
	"context"
	"fmt"
	"time"
)

// A QuotaStore divides, per key, a limit among the holders that ask for
// a share of it (edge quotas: Envoy instances over the Rate Limit Quota
// Service, Go programs that decide locally with a Quota), by their
// demand, and keeps the table of shares where every process sharing the
// store sees it. It is an optional capability of a Store, found by type
// assertion; store/memory, store/redis and store/memcached implement it.
//
// Each call is one atomic step on the key's table: concurrent calls for
// the same key, from any number of goroutines or processes, behave as if
// they ran one after another, so the shares a table counts never sum to
// more than the limit (see algorithm.QuotaTable for the division). A
// share counts until it expires (ShareRequest.TTL after the holder's
// last call, by the store's clock or ShareRequest.Now) or its holder
// releases it: a holder that stops asking gives its share back within
// one TTL.
//
// A table full of holders is a Share with Full set, not an error; the
// error wraps ErrStore only when the store could not decide, and
// ErrInvalidRequest for a malformed request. Implementations must pass
// store/storetest.RunQuotas.
type QuotaStore interface {
	Share(ctx context.Context, r ShareRequest) (Share, error)
}

// Bounds of a ShareRequest, so that a hostile caller cannot make a store
// hold an unbounded table per key or shares that never expire.
const (
	// MaxQuotaHolders is the most holders a key's table holds.
	MaxQuotaHolders = 1024
	// MaxQuotaRate is the largest Limit.Rate a quota divides: shares
	// travel as 32-bit token counts in Envoy's token buckets.
	MaxQuotaRate = 1<<31 - 1
	// MaxHolderLen is the longest ShareRequest.Holder.
	MaxHolderLen = 64
	// UnknownDemand is the Demand of a holder whose use is not measured
	// yet: it counts as wanting the whole limit (see
	// algorithm.UnknownDemand).
	UnknownDemand = -1
	// KeepDemand is the Demand of a holder that asks again without a
	// new measure (an edge that reconnected): the demand its table
	// holds for it, or UnknownDemand for a newcomer (see
	// algorithm.KeepDemand).
	KeepDemand = -2
)

// A ShareRequest asks a QuotaStore for the share of one holder in the
// limit of one key, or gives it back.
type ShareRequest struct {
	// Prefix and Key name the table, as in Request: Prefix+Key, any
	// bytes, bounded in length by the caller.
	Prefix, Key string
	// Holder names the holder: 1 to MaxHolderLen bytes, unique among
	// the holders of the key. A holder that asks again under the same
	// name replaces its share (a reconnecting edge keeps its share).
	Holder string
	// Limit is the limit divided: Rate units per Period, Rate from 1 to
	// MaxQuotaRate. Its other fields are not read. The table is the same
	// for limits of the same Period (the key's state is named by it), so
	// a new Rate keeps the holders.
	Limit Limit
	// Reserve is how many units of the limit are kept for holders that
	// hold no share yet, so that a newcomer gets a share at once while
	// the others hold all they may (see algorithm.QuotaTable): 0 (the
	// default) to Limit.Rate/2.
	Reserve int
	// Demand is what the holder wants, in units per Limit.Period: at
	// least 0, or UnknownDemand, or KeepDemand. More than Limit.Rate counts as
	// Limit.Rate.
	Demand int
	// TTL is how long the share counts from now, unless the holder asks
	// again or releases it: from MinLeaseTTL to MaxLeaseTTL.
	TTL time.Duration
	// Release gives the holder's share back instead (Demand and TTL are
	// not read): for an edge that no longer uses the key.
	Release bool
	// Now is the time of the request; zero means the store's clock (for
	// a shared store, the server's, so skewed hosts agree on expiries).
	Now time.Time
}

// Validate checks what every QuotaStore requires of a request.
func (r *ShareRequest) Validate() error {
	switch {
	case len(r.Holder) == 0 || len(r.Holder) > MaxHolderLen:
		return fmt.Errorf("%w: holder of %d bytes, want 1 to %d", ErrInvalidRequest, len(r.Holder), MaxHolderLen)
	case r.Limit.Rate < 1 || r.Limit.Rate > MaxQuotaRate:
		return fmt.Errorf("%w: quota rate %d, want 1 to %d", ErrInvalidRequest, r.Limit.Rate, MaxQuotaRate)
	case r.Limit.Period <= 0 || r.Limit.Period > MaxPeriod:
		return fmt.Errorf("%w: quota period %v, want up to %v", ErrInvalidRequest, r.Limit.Period, MaxPeriod)
	case r.Reserve < 0 || r.Reserve > r.Limit.Rate/2:
		return fmt.Errorf("%w: quota reserve %d, want 0 to %d", ErrInvalidRequest, r.Reserve, r.Limit.Rate/2)
	case r.Release:
	case r.Demand < KeepDemand:
		return fmt.Errorf("%w: demand %d, want at least 0 (or UnknownDemand, KeepDemand)", ErrInvalidRequest, r.Demand)
	case r.TTL < MinLeaseTTL || r.TTL > MaxLeaseTTL:
		return fmt.Errorf("%w: share ttl %v, want %v to %v", ErrInvalidRequest, r.TTL, MinLeaseTTL, MaxLeaseTTL)
	}
	return checkTime(r.Now)
}

// QuotaStateID ends the name of a key's table of shares in a shared
// store, in place of a limit's StateID: the limit's StateID with its
// top byte replaced by 'q', so that tables of different periods are
// apart and none names a rate state or a lease table.
func QuotaStateID(l Limit) uint64 {
	return l.StateID()&(1<<56-1) | uint64('q')<<56
}

// A Share is a QuotaStore's answer: the holder's share and the key's
// table after the call.
type Share struct {
	// Rate is the holder's share: units per Limit.Period it may admit,
	// until Expires. 0 after a Release, and when Full.
	Rate int
	// Limit is the request's Limit.
	Limit Limit
	// Holders is the number of holders of the key after the call.
	Holders int
	// Granted is the sum of their shares: at most Limit.Rate.
	Granted int
	// Demand is the sum of their demands (each at most Limit.Rate).
	Demand int
	// Expires is when the share stops counting, unless renewed.
	Expires time.Time
	// Full reports a refusal because the key's table holds
	// MaxQuotaHolders other holders, or because the store had no room
	// for another (store/memory at its cap): a full table refuses a
	// newcomer rather than take a share from the holders.
	Full bool
	// Time is when the store decided, by the clock it used.
	Time time.Time
}
