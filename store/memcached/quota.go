package memcached

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/internal/meta"
)

var _ sluice.QuotaStore = (*Store)(nil)

// quotaKey returns the key of the item that holds the table of shares of
// an actor's name and limit l: name|quota:ID, on the server the name
// hashes to.
func quotaKey(name string, l sluice.Limit) string {
	return name + "|quota:" + strconv.FormatUint(sluice.QuotaStateID(l), 16)
}

// Share grants, renews or releases a holder's share; see
// sluice.QuotaStore and algorithm.QuotaTable. The key's whole table is
// one item, read with its CAS token and written back by compare-and-set
// (or add, when there was none), so each call is atomic, as Acquire's
// is: two round trips, more when another process wrote the table in
// between (each lost race reads again, up to MaxRetries, then
// ErrContention). Times are this process's clock unless r.Now is set:
// the processes sharing the memcached fleet must keep their clocks in
// step (as for leases).
func (s *Store) Share(ctx context.Context, r sluice.ShareRequest) (sluice.Share, error) {
	if err := r.Validate(); err != nil {
		return sluice.Share{}, err
	}
	name := keyName(r.Prefix + r.Key)
	c := s.clients[s.ring.server(name)]
	key := quotaKey(name, r.Limit)
	b := s.batches.Get().(*meta.Batch)
	defer s.batches.Put(b)
	for attempt := 0; attempt <= s.retries; attempt++ {
		now := r.Now
		if now.IsZero() {
			now = time.Now()
		}
		sh, done, err := s.shareOnce(ctx, c, b, key, &r, now.UnixNano())
		if err != nil {
			return sluice.Share{}, wrap(err)
		}
		if done {
			return sh, nil
		}
		backoff(attempt)
	}
	return sluice.Share{}, ErrContention
}

// shareOnce reads the table of key, applies r at now, and writes it back
// if it changed; done is false when another write came first.
func (s *Store) shareOnce(ctx context.Context, c *meta.Client, b *meta.Batch, key string, r *sluice.ShareRequest, now int64) (sh sluice.Share, done bool, err error) {
	value, cas, found, err := readTable(ctx, c, b, key)
	if err != nil {
		return sh, false, err
	}
	var t algorithm.QuotaTable
	if found {
		if t, err = algorithm.DecodeQuotaTable(value, sluice.MaxQuotaHolders); err != nil {
			return sh, false, fmt.Errorf("%w: memcached: %s: %w", sluice.ErrCorruptState, key, err)
		}
	}
	sh = sluice.Share{Limit: r.Limit, Time: time.Unix(0, now)}
	var rate int64
	ok := true
	if r.Release {
		t.Release(r.Holder, now)
	} else {
		exp := now + int64(r.TTL)
		if rate, ok = t.Share(r.Holder, int64(r.Demand), int64(r.Limit.Rate), int64(r.Reserve), now, exp, sluice.MaxQuotaHolders); ok {
			sh.Expires = time.Unix(0, exp)
		}
	}
	sh.Rate, sh.Full = int(rate), !ok
	sh.Holders, sh.Granted, sh.Demand = len(t.Holders), int(t.Granted()), int(t.Demand(int64(r.Limit.Rate)))
	enc, err := t.AppendBinary(nil)
	if err != nil {
		return sh, false, err
	}
	won, err := s.writeTable(ctx, c, b, key, enc, t.Latest(), found, cas, now)
	return sh, won, err
}
