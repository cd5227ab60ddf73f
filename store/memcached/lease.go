package memcached

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/internal/meta"
)

var _ sluice.LeaseStore = (*Store)(nil)

// leaseKey returns the key of the item that holds the lease table of an
// actor's name: name|lease, on the server the name hashes to.
func leaseKey(name string) string { return name + "|lease" }

// Acquire grants a lease; see sluice.LeaseStore and the package
// documentation: the key's whole lease table is one item, read with its
// CAS token and written back by compare-and-set (or add, when there was
// none), so each call is atomic. It takes two round trips, more when
// another process wrote the table in between (each lost race reads
// again, up to MaxRetries, then ErrContention). A denial writes nothing.
func (s *Store) Acquire(ctx context.Context, r sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return s.lease(ctx, &r, "acquire")
}

// Release ends a lease; see Acquire.
func (s *Store) Release(ctx context.Context, r sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return s.lease(ctx, &r, "release")
}

// Extend renews a live lease; see Acquire.
func (s *Store) Extend(ctx context.Context, r sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return s.lease(ctx, &r, "extend")
}

func (s *Store) lease(ctx context.Context, r *sluice.LeaseRequest, op string) (sluice.LeaseDecision, error) {
	if err := r.Validate(op); err != nil {
		return sluice.LeaseDecision{}, err
	}
	name := keyName(r.Prefix + r.Key)
	c := s.clients[s.ring.server(name)]
	key := leaseKey(name)
	b := s.batches.Get().(*meta.Batch)
	defer s.batches.Put(b)
	for attempt := 0; attempt <= s.retries; attempt++ {
		now := r.Now
		if now.IsZero() {
			now = time.Now()
		}
		d, done, err := s.leaseOnce(ctx, c, b, key, r, op, now.UnixNano())
		if err != nil {
			return sluice.LeaseDecision{}, wrap(err)
		}
		if done {
			return d, nil
		}
		backoff(attempt)
	}
	return sluice.LeaseDecision{}, ErrContention
}

// leaseOnce reads the table of key, applies op at now, and writes it back
// if it changed; done is false when another write came first.
func (s *Store) leaseOnce(ctx context.Context, c *meta.Client, b *meta.Batch, key string, r *sluice.LeaseRequest, op string, now int64) (d sluice.LeaseDecision, done bool, err error) {
	value, cas, found, err := readTable(ctx, c, b, key)
	if err != nil {
		return d, false, err
	}
	var t algorithm.LeaseTable
	if found {
		if t, err = algorithm.DecodeLeaseTable(value, sluice.MaxLeases); err != nil {
			return d, false, fmt.Errorf("%w: memcached: %s: %w", sluice.ErrCorruptState, key, err)
		}
	}
	pruned := t.Prune(now) > 0
	d = applyLease(&t, r, op, now)
	if !d.Allowed && !pruned {
		return d, true, nil // nothing to write
	}
	ok, err := s.writeLeases(ctx, c, b, key, &t, found, cas, now)
	return d, ok, err
}

// applyLease applies op to t at now and returns the decision.
func applyLease(t *algorithm.LeaseTable, r *sluice.LeaseRequest, op string, now int64) sluice.LeaseDecision {
	exp := now + int64(r.TTL)
	d := sluice.LeaseDecision{Limit: r.Limit, Time: time.Unix(0, now)}
	switch op {
	case "acquire":
		d.Allowed = t.Acquire(r.ID, r.EffectiveCeiling(), now, exp)
	case "release":
		d.Allowed = t.Release(r.ID, now)
	default:
		d.Allowed = t.Extend(r.ID, now, exp)
	}
	d.InUse = len(t.Leases)
	switch {
	case d.Allowed && op != "release":
		d.Expires = time.Unix(0, t.Expires(r.ID))
	case !d.Allowed && op == "acquire" && d.InUse > 0:
		d.RetryAfter = time.Duration(t.Earliest() - now)
	}
	return d
}

// writeLeases writes t to key by compare-and-set with cas (or add, when
// the item was not found), to expire with its last lease plus the store's
// margin, and reports whether it won.
func (s *Store) writeLeases(ctx context.Context, c *meta.Client, b *meta.Batch, key string, t *algorithm.LeaseTable, found bool, cas uint64, now int64) (bool, error) {
	enc, err := t.AppendBinary(nil)
	if err != nil {
		return false, err
	}
	return s.writeTable(ctx, c, b, key, enc, t.Latest(), found, cas, now)
}

// readTable reads the encoded table of key and its CAS token; found is
// false when memcached holds none.
func readTable(ctx context.Context, c *meta.Client, b *meta.Batch, key string) (value []byte, cas uint64, found bool, err error) {
	b.Reset()
	b.GetCAS(key)
	if err := c.Do(ctx, b); err != nil {
		return nil, 0, false, err
	}
	switch rep := &b.Replies[0]; rep.Status {
	case meta.StatusValue:
		return rep.Value, rep.CAS, true, nil
	case meta.StatusMiss:
		return nil, 0, false, nil
	default:
		return nil, 0, false, unexpected(rep)
	}
}

// writeTable writes the encoded table enc to key by compare-and-set with
// cas (or add, when the item was not found), to expire at last (Unix ns)
// plus the store's margin, and reports whether it won.
func (s *Store) writeTable(ctx context.Context, c *meta.Client, b *meta.Batch, key string, enc []byte, last int64, found bool, cas uint64, now int64) (bool, error) {
	ttl := s.margin
	if last > now {
		ttl += time.Duration(last - now)
	}
	b.Reset()
	if found {
		b.CompareAndSet(key, enc, ttl, cas)
	} else {
		b.Add(key, enc, ttl)
	}
	if err := c.Do(ctx, b); err != nil {
		return false, err
	}
	switch rep := &b.Replies[0]; rep.Status {
	case meta.StatusOK:
		return true, nil
	case meta.StatusExists, meta.StatusNotFound, meta.StatusNotStored:
		return false, nil
	default:
		return false, unexpected(rep)
	}
}
