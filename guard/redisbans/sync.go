package redisbans

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/banfield"
)

// flushBatch bounds the changes one round trip of a flush writes.
const flushBatch = 256

// An op is a change this process made, kept until Redis confirms it.
type op struct {
	seq    uint64    // orders the ops of a process
	field  string    // of ban's jail and key
	ban    guard.Ban // the ban put as the set recorded it; for a lift, the ban held (Until zero if none)
	merged []string  // fields of the bans merged into ban, to delete
	lift   bool      // a lift of field, not a put
	// restore writes ban back only if Redis holds no change of its
	// field: one would be later than the load that found the ban lost.
	restore bool
}

// fields returns the fields of bans.
func fields(bans []guard.Ban) []string {
	out := make([]string, len(bans))
	for i, b := range bans {
		out[i] = banfield.Name(b.Jail, b.Key)
	}
	return out
}

// queue numbers o and keeps it until Redis confirms it, in place of any
// earlier change of its field or of a ban merged into it, unless pending
// is full: then o is only written once, and a resync will write back
// the ban. It returns o. It requires r.mu.
func (r *Registry) queue(o *op) *op {
	r.seq++
	o.seq = r.seq
	for _, f := range o.merged {
		delete(r.pending, f)
		r.merged[f] = struct{}{}
	}
	if !o.lift {
		delete(r.merged, o.field) // put again here, after the merge
	}
	if _, ok := r.pending[o.field]; !ok && len(r.pending) >= r.maxPending {
		r.dropped.Add(1)
		r.dirty.Store(true)
		return o
	}
	r.pending[o.field] = o
	return o
}

// confirm forgets o, which Redis now holds, unless a later change of its
// field replaced it.
func (r *Registry) confirm(o *op) {
	r.mu.Lock()
	if r.pending[o.field] == o {
		delete(r.pending, o.field)
	}
	r.mu.Unlock()
}

// execs returns the script and its calls that write o: a lift, or a put
// and its first mergeChunk deletes, then the other deletes by chunks.
func (r *Registry) execs(o *op) (script, []rueidis.LuaExec) {
	if o.lift {
		until := "0"
		if !o.ban.Until.IsZero() {
			until = strconv.FormatInt(ceilMilli(o.ban.Until), 10)
		}
		now := strconv.FormatInt(floorMilli(r.clock()), 10)
		return liftScript, []rueidis.LuaExec{{Keys: r.keys, Args: []string{o.field, until, now, r.logLength}}}
	}
	now := strconv.FormatInt(floorMilli(o.ban.Since), 10)
	restore := map[bool]string{true: "1", false: "0"}[o.restore]
	n := min(len(o.merged), mergeChunk)
	out := []rueidis.LuaExec{{Keys: r.keys, Args: append([]string{o.field, encode(o.ban),
		strconv.FormatInt(ceilMilli(o.ban.Until), 10), now, strconv.Itoa(pruneBatch), r.logLength, restore}, o.merged[:n]...)}}
	for rest := o.merged[n:]; len(rest) > 0; rest = rest[n:] {
		n = min(len(rest), mergeChunk)
		out = append(out, rueidis.LuaExec{Keys: r.keys, Args: append([]string{"", "", "0", now, strconv.Itoa(pruneBatch), r.logLength, "0"}, rest[:n]...)})
	}
	return putScript, out
}

// write writes o to Redis, and reports, for a lift, whether Redis held
// the ban in force.
func (r *Registry) write(ctx context.Context, o *op) (bool, error) {
	s, calls := r.execs(o)
	var n int64
	for _, c := range calls {
		var err error
		if n, err = s.exec(ctx, r.c, c.Keys, c.Args).AsInt64(); err != nil {
			return false, err
		}
	}
	return o.lift && n == 1, nil
}

// flush writes the changes Redis has not confirmed, oldest first, a
// batch per round trip, and forgets those it wrote.
func (r *Registry) flush(ctx context.Context) error {
	r.mu.Lock()
	ops := slices.Collect(maps.Values(r.pending))
	r.mu.Unlock()
	slices.SortFunc(ops, func(a, b *op) int { return cmp.Compare(a.seq, b.seq) })
	for len(ops) > 0 {
		n := min(len(ops), flushBatch)
		if err := r.writeBatch(ctx, ops[:n]); err != nil {
			return fmt.Errorf("%w: redisbans: %d changes not written: %w", sluice.ErrStore, len(ops), err)
		}
		ops = ops[n:]
	}
	return nil
}

// writeBatch writes ops, in one round trip per script, and confirms
// each whose calls all succeeded.
func (r *Registry) writeBatch(ctx context.Context, ops []*op) error {
	var errs []error
	for _, lift := range []bool{false, true} {
		var s script
		var calls []rueidis.LuaExec
		var owners []*op
		for _, o := range ops {
			if o.lift == lift {
				sc, c := r.execs(o)
				s, calls = sc, append(calls, c...)
				for range c {
					owners = append(owners, o)
				}
			}
		}
		if len(calls) == 0 {
			continue
		}
		failed := map[*op]bool{}
		for i, res := range s.execMulti(ctx, r.c, calls) {
			if err := res.Error(); err != nil {
				failed[owners[i]] = true
				errs = append(errs, err)
			}
		}
		for _, o := range owners {
			if !failed[o] {
				r.confirm(o)
			}
		}
	}
	if len(errs) > 0 {
		return errs[0] // the others say the same, as a rule
	}
	return nil
}

// A snapshot is what Redis holds: the bans, the lifts (as bans of the
// lifted key until the lifted ban's end), and the log's position when
// the load began.
type snapshot struct {
	version     int64
	last        string
	bans, lifts []guard.Ban
}

// head returns the log's version and last entry's ID, and how many bans
// the hash holds, read at one instant.
func (r *Registry) head(ctx context.Context) (version int64, last string, bans int64, err error) {
	keys := []string{r.keys[keyVersion], r.keys[keyLog], r.keys[keyBans]}
	a, err := headScript.exec(ctx, r.c, keys, nil).ToArray()
	if err != nil {
		return 0, "", 0, err
	}
	if len(a) != 3 {
		return 0, "", 0, fmt.Errorf("head: %d values, want 3", len(a))
	}
	v, err1 := a[0].ToString()
	last, err2 := a[1].ToString()
	bans, err3 := a[2].AsInt64()
	version, err4 := strconv.ParseInt(v, 10, 64)
	return version, last, bans, errors.Join(err1, err2, err3, err4)
}

// load reads every ban and lift in Redis, page by page. Changes made
// during the load are in the log after the snapshot's position: the
// replica applies them after.
func (r *Registry) load(ctx context.Context) (snapshot, error) {
	var s snapshot
	var err error
	if s.version, s.last, _, err = r.head(ctx); err != nil {
		return s, err
	}
	err = r.scan(ctx, r.keys[keyBans], func(f, v string) {
		if b, ok := decode(f, v); ok {
			s.bans = append(s.bans, b)
		}
	})
	if err != nil {
		return s, err
	}
	err = r.scan(ctx, r.keys[keyLifts], func(f, v string) {
		if b, ok := decodeLift(f, v); ok {
			s.lifts = append(s.lifts, b)
		}
	})
	return s, err
}

// resync loads every ban from Redis into the set, keeping this process's
// pending changes and writing back the bans it holds that Redis lost, and
// moves the replica to the log's position of the load. Only a failed
// load is an error: failed writes are left to retry.
func (r *Registry) resync(ctx context.Context) error {
	s, err := r.load(ctx)
	if err != nil {
		return fmt.Errorf("%w: redisbans: load: %w", sluice.ErrStore, err)
	}
	r.dirty.Store(false) // what fails from here on sets it again
	r.retry.Store(false) // flushed below
	r.mu.Lock()
	r.merge(s, r.clock())
	r.last = s.last
	r.version.Store(s.version)
	r.mu.Unlock()
	r.resyncs.Add(1)
	if err := r.flush(ctx); err != nil {
		r.retry.Store(true) // the load is done: only the writes are to try again
	}
	return nil
}

// merge makes the set hold what Redis holds in s, then queues for
// writing back the bans it held that Redis lost, and replays this
// process's pending changes, which are later than anything in s. It
// requires r.mu.
func (r *Registry) merge(s snapshot, now time.Time) {
	next := r.set.Fresh()
	direct := r.set.Stats().Bans == 0 && len(r.pending) == 0
	if direct { // at start: nothing to keep, so load straight into the set
		next = &r.set
	}
	for _, b := range s.bans {
		if !b.Until.After(now) {
			continue
		}
		for _, o := range putIn(next, b, now) {
			r.queue(o) // coarsened at capacity: written, so that Redis holds what this process enforces
		}
	}
	lifted := &guard.BanSet{BanLimits: guard.BanLimits{Max: 2*len(s.lifts) + 2, MaxKeys: len(s.lifts) + 1}}
	for _, b := range s.lifts {
		_, _ = lifted.Put(b, now) // lapsed ones are refused: they protect nothing
	}
	held := r.set.List(time.Time{}) // every ban, lapsed or not: List(now) would drop some
	for _, b := range held {
		if r.pending[banfield.Name(b.Jail, b.Key)] != nil || !lost(b, next, lifted, now) {
			continue
		}
		if rec, m, err := next.PutMerged(b, now); err == nil {
			ops := putOps(rec, m)
			ops[len(ops)-1].restore = true // rec's
			for _, o := range ops {
				r.queue(o)
			}
			r.writtenBack.Add(1)
		}
	}
	// The merges Redis holds are in s; those pending are logged later.
	clear(r.merged)
	pending := slices.SortedFunc(maps.Values(r.pending), func(a, b *op) int { return cmp.Compare(a.seq, b.seq) })
	for _, o := range pending {
		for _, f := range o.merged {
			r.merged[f] = struct{}{}
		}
		if o.lift {
			next.Delete(o.ban.Jail, o.ban.Key)
		} else {
			_, _ = next.Put(o.ban, time.Time{})
		}
	}
	if !direct {
		r.replace(next, held)
	}
}

// lost reports whether b, held here, is a ban Redis lost: in force at
// now, held by next (what Redis holds) neither as it is nor under a
// network ban that lasts as long, and not lifted, by itself or with a
// network that holds it.
func lost(b guard.Ban, next, lifted *guard.BanSet, now time.Time) bool {
	if !b.Until.After(now) {
		return false
	}
	if _, ok := next.Get(b.Jail, b.Key); ok {
		return false
	}
	if _, ok := lifted.Match(b.Jail, b.Key, now); ok {
		return false
	}
	m, ok := next.Match(b.Jail, b.Key, now)
	return !ok || m.Until.Before(b.Until)
}

// replace makes the set, which held held, hold what next holds, in place:
// whoever enforces from the set keeps it, and a ban in both is never
// missing from it. It requires r.mu.
func (r *Registry) replace(next *guard.BanSet, held []guard.Ban) {
	for _, b := range held {
		if _, ok := next.Get(b.Jail, b.Key); !ok {
			r.set.Delete(b.Jail, b.Key)
		}
	}
	for _, b := range next.List(time.Time{}) {
		_, _ = r.set.Put(b, time.Time{}) // the set is now a subset of next: no capacity to hit
	}
}

// sortBans sorts bans by jail, then key.
func sortBans(bans []guard.Ban) {
	slices.SortFunc(bans, func(a, b guard.Ban) int {
		return cmp.Or(strings.Compare(a.Jail, b.Jail), strings.Compare(a.Key, b.Key))
	})
}
