package redisbans

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/banfield"
)

// follow applies the change log to the set until ctx is done: it reads
// the log, writes again the changes that failed, reloads after a gap or
// a failure, and checks now and then that Redis still holds the bans.
func (r *Registry) follow(ctx context.Context) {
	defer close(r.done)
	stale, backoff, checked := false, minBackoff, time.Now()
	for ctx.Err() == nil {
		var err error
		reload := true // whether a failure of this round calls for a reload
		switch {
		case stale || r.dirty.Load():
			err = r.resync(ctx)
		case r.retry.Swap(false):
			if err = r.flush(ctx); err != nil {
				r.retry.Store(true)
				reload = false // writes failed; reads may work (Redis out of memory)
			}
		case time.Since(checked) >= r.checkEvery:
			checked = time.Now()
			err = r.check(ctx)
		default:
			err = r.step(ctx)
		}
		switch {
		case err == nil:
			stale, backoff = false, minBackoff
			continue
		case errors.Is(err, errGap):
			stale = true
			continue
		}
		stale = stale || reload
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// step waits up to followBlock for entries after the last one applied,
// and applies them. The read is built so that the client does not retry
// it: a broken connection must be seen, for the replica to reload (Redis
// may have restarted empty). Cancelling ctx aborts the read at once and
// closes its connection, so that Close is prompt; no CLIENT UNBLOCK
// (rueidis' UnblockOnCancel), whose request raced with closing the
// client and once hung its Close. A peer gone silent is found by the
// client's TCP keepalive.
func (r *Registry) step(ctx context.Context) error {
	cmd := r.c.B().Arbitrary("XREAD", "COUNT", strconv.Itoa(followCount), "BLOCK", strconv.FormatInt(followBlock.Milliseconds(), 10), "STREAMS").
		Keys(r.keys[keyLog]).Args(r.last).Blocking()
	streams, err := r.c.Do(ctx, cmd).AsXReadSlices()
	if rueidis.IsRedisNil(err) {
		return nil // nothing new
	}
	if err != nil {
		return fmt.Errorf("%w: redisbans: follow: %w", sluice.ErrStore, err)
	}
	ops, err := r.apply(streams[r.keys[keyLog]])
	for _, o := range ops {
		if _, werr := r.write(ctx, o); werr != nil {
			r.retry.Store(true)
			break
		}
		r.confirm(o)
	}
	return err
}

// apply applies entries of the log to the set, in order, and returns
// errGap at the first whose version does not follow the last applied.
// An entry something else wrote is skipped. A put the set coarsens (at
// capacity, because this set held bans the writer's did not) is this
// process's own change, which it returns, queued, to be written: what
// one process enforces, every process does.
func (r *Registry) apply(entries []rueidis.XRangeSlice) ([]*op, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ops []*op
	for _, e := range entries {
		v, changes, ok := parseEntry(e)
		if !ok {
			r.last = e.ID
			continue
		}
		if v != r.version.Load()+1 {
			return ops, errGap
		}
		for _, c := range changes {
			switch {
			case !c.put:
				r.set.Delete(c.ban.Jail, c.ban.Key)
				if len(r.merged) > 0 {
					delete(r.merged, banfield.Name(c.ban.Jail, c.ban.Key))
				}
			case r.supersededPut(c.ban):
			default:
				for _, o := range putIn(&r.set, c.ban, time.Time{}) {
					ops = append(ops, r.queue(o))
				}
			}
		}
		r.last = e.ID
		r.version.Store(v)
		r.applied.Add(int64(len(changes)))
	}
	return ops, nil
}

// supersededPut reports whether b, put by an entry of the log, is a ban
// this process merged into a wider one, whose deletes come later in the
// log (Redis no longer holds it), and which the set still enforces, by a
// ban of its jail that lasts as long: skipping it loses nothing. A put of
// a merged field that nothing here covers so is applied, and the field
// no longer skipped. It requires r.mu.
func (r *Registry) supersededPut(b guard.Ban) bool {
	if len(r.merged) == 0 {
		return false
	}
	f := banfield.Name(b.Jail, b.Key)
	if _, ok := r.merged[f]; !ok {
		return false
	}
	if m, ok := r.set.Match(b.Jail, b.Key, r.clock()); ok && !m.Until.Before(b.Until) {
		return true
	}
	delete(r.merged, f)
	return false
}

// putIn puts b, a ban Redis holds, in set, judging lapsed bans at now.
// If the set merged bans to make room, it returns the op that writes the
// network ban it made, deleting the bans merged into it (b among them,
// if b merged into a wider ban); else nil. A ban the set refuses (its
// share full) is counted by the set's Stats.
func putIn(set *guard.BanSet, b guard.Ban, now time.Time) []*op {
	rec, m, err := set.PutMerged(b, now)
	if err != nil || m.Into.Key == "" {
		return nil
	}
	o := &op{field: banfield.Name(m.Into.Jail, m.Into.Key), ban: m.Into, merged: fields(m.Merged)}
	if k := guard.BanKey(b.Key); m.Into.Key == rec.Key && k != rec.Key { // b merged into a wider ban; not a network that absorbed others
		o.merged = append(o.merged, banfield.Name(b.Jail, k))
	}
	return []*op{o}
}

// putOps returns the ops that write rec, a ban a set recorded, and m,
// the merge it made room with: the merge first, so that Redis never
// holds more than the set; rec's op last.
func putOps(rec guard.Ban, m guard.Merge) []*op {
	o := &op{field: banfield.Name(rec.Jail, rec.Key), ban: rec}
	switch {
	case m.Into.Key == "":
	case m.Into.Key == rec.Key && m.Into.Jail == rec.Jail:
		o.merged = fields(m.Merged)
	default:
		return []*op{{field: banfield.Name(m.Into.Jail, m.Into.Key), ban: m.Into, merged: fields(m.Merged)}, o}
	}
	return []*op{o}
}

// check returns errGap if Redis lost changes this replica applied: its
// version went back, or its hash of bans is gone while bans are in force
// here (a restart without persistence, an eviction); or if this replica
// stopped seeing the log: Redis was ahead of it at the last check too,
// and it applied nothing since (its blocking read follows a server that
// no longer gets the changes, as the master before a failover may).
func (r *Registry) check(ctx context.Context) error {
	version, _, bans, err := r.head(ctx)
	if err != nil {
		return fmt.Errorf("%w: redisbans: check: %w", sluice.ErrStore, err)
	}
	applied := r.version.Load()
	stuck := version > applied && r.behind == applied
	r.behind = -1
	if version > applied {
		r.behind = applied
	}
	if version < applied || bans == 0 && r.holds() || stuck {
		return errGap
	}
	return nil
}

// holds reports whether the set holds a ban in force.
func (r *Registry) holds() bool {
	now := r.clock()
	for _, b := range r.set.List(time.Time{}) {
		if b.Until.After(now) {
			return true
		}
	}
	return false
}
