package memcachedbans

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/banfield"
	"github.com/sluicehq/sluice/internal/meta"
)

// errConflict means a write of a page lost to another process's.
var errConflict = errors.New("memcachedbans: page changed meanwhile")

// nextStamp returns a stamp for a change of this process: now, or just
// after the last one. It requires r.mu.
func (r *Registry) nextStamp() int64 {
	r.stamp = max(r.clock().UnixNano(), r.stamp+1)
	return r.stamp
}

// note records e, of field f, as a change of this process, to write,
// and returns its page. It requires r.mu.
func (r *Registry) note(f string, e entry) int {
	p := pageOf(f, len(r.keys))
	pg := maps(r.pages[p])
	pg[f] = e
	r.pages[p] = pg
	r.gen++
	r.dirty[p] = r.gen
	return p
}

// maps returns a copy of pg, to change: pages are shared once read.
func maps(pg page) page {
	out := make(page, len(pg)+1)
	for f, e := range pg {
		out[f] = e
	}
	return out
}

// noteBan records the ban rec as a change of this process, and lifts the
// bans merged into it, and returns the pages to write: rec's first, so
// that no process sees the lifts before the network ban. It requires
// r.mu.
func (r *Registry) noteBan(rec guard.Ban, merged []guard.Ban) []int {
	stamp := r.nextStamp()
	pages := []int{r.note(banfield.Name(rec.Jail, rec.Key), entry{ban: rec, stamp: stamp})}
	for _, m := range merged {
		p := r.note(banfield.Name(m.Jail, m.Key), entry{ban: m, lifted: true, into: rec.Key, stamp: stamp})
		if !slices.Contains(pages, p) {
			pages = append(pages, p)
		}
	}
	return pages
}

// A read is a page as a server returned it, or as this process knows
// it.
type read struct {
	pg    page
	data  []byte // as stored, to tell whether the merge changed it
	cas   uint64
	found bool
	known bool // not read: what this process last knew
}

// syncPage makes page p in memcached and here agree: it merges the page
// as memcached holds it (rd, or read now when nil; a first write trusts
// the version this process knows) with what this process knows, applies
// the result to the set, and writes it if memcached lacks any of it, by
// compare-and-set, reading again after a conflict.
func (r *Registry) syncPage(ctx context.Context, p int, rd *read) error {
	r.pageMu[p].Lock()
	defer r.pageMu[p].Unlock()
	if rd == nil {
		r.mu.Lock()
		rd = &read{pg: r.pages[p], cas: r.tokens[p], found: r.tokens[p] != 0, known: true}
		r.mu.Unlock()
	}
	for range maxAttempts {
		data, gen, write := r.mergeIn(p, rd)
		if !write {
			r.settle(p, rd.cas, gen)
			return nil
		}
		cas, err := r.writePage(ctx, p, data, rd)
		if err == nil {
			r.settle(p, cas, gen)
			return nil
		}
		if !errors.Is(err, errConflict) {
			return err
		}
		r.conflicts.Add(1)
		if rd, err = r.readPage(ctx, p); err != nil {
			return err
		}
	}
	return fmt.Errorf("page %d: %d writes lost to other processes", p, maxAttempts)
}

// mergeIn merges rd into what this process knows of page p, applies the
// entries that changed to the set, and returns the merged page encoded,
// the generation of this process's changes it holds, and whether
// memcached lacks any of it.
func (r *Registry) mergeIn(p int, rd *read) ([]byte, uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock()
	old := r.pages[p]
	merged := merge(rd.pg, old, now)
	r.pages[p] = merged
	var changed []entry
	for f, e := range merged {
		if o, ok := old[f]; !ok || !sameEntry(e, o) {
			changed = append(changed, e)
		}
	}
	for _, e := range changed {
		r.apply(e)
	}
	data := r.pages[p].encode() // apply may have noted coarsenings here
	if !rd.found && len(r.pages[p]) == 0 {
		return data, r.dirty[p], false // nothing to keep: leave the page missing
	}
	if !rd.found && !rd.known && len(old) > 0 {
		r.restored.Add(1) // evicted, or its server restarted
	}
	return data, r.dirty[p], !rd.found || !bytes.Equal(data, rd.data)
}

// apply makes the set hold e, an entry new to this process. A ban the set
// coarsens at capacity becomes this process's change, to write, so that
// memcached holds what it enforces. A ban lifted as merged into a
// network ban that the set does not hold yet is covered by that network
// ban first, if the set holds it: it is never unbanned in between. It
// requires r.mu.
func (r *Registry) apply(e entry) {
	now := r.clock()
	switch {
	case e.lifted && e.into != "":
		if _, held := r.set.Get(e.ban.Jail, e.ban.Key); !held {
			break // nothing to keep banned: the network ban comes in its own page
		}
		if _, ok := r.set.Get(e.ban.Jail, e.into); !ok {
			cover := guard.Ban{Jail: e.ban.Jail, Key: e.into, Reason: "bans merged at capacity", Since: e.ban.Since, Until: e.ban.Until}
			r.put(cover)
		}
		if _, ok := r.set.Match(e.ban.Jail, e.into, now); ok {
			r.set.Delete(e.ban.Jail, e.ban.Key) // covered: never unbanned in between
		}
	case e.lifted:
		r.set.Delete(e.ban.Jail, e.ban.Key)
	case e.ban.Until.After(now):
		r.put(e.ban)
	}
}

// put puts b, from memcached, in the set, and notes the network ban the
// set made to make room, if it did. It requires r.mu.
func (r *Registry) put(b guard.Ban) {
	rec, m, err := r.set.PutMerged(b, time.Time{})
	if err != nil || m.Into.Key == "" {
		return // refused at capacity: counted by the set's Stats
	}
	if m.Into.Key == rec.Key && guard.BanKey(b.Key) != rec.Key { // b merged into a wider ban; not a network that absorbed others
		m.Merged = append(m.Merged, b)
	}
	r.noteBan(m.Into, m.Merged)
}

// settle records that memcached holds page p at token cas, with this
// process's changes up to generation gen. It requires not r.mu.
func (r *Registry) settle(p int, cas, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens[p] = cas
	if r.dirty[p] == gen {
		r.dirty[p] = 0
	}
}

// client returns the client of page p's server.
func (r *Registry) client(p int) *meta.Client { return r.clients[p%len(r.clients)] }

// readPage reads page p.
func (r *Registry) readPage(ctx context.Context, p int) (*read, error) {
	reads, err := r.readPages(ctx, []int{p})
	if err != nil {
		return nil, err
	}
	return reads[p], nil
}

// readPages reads pages ps, one round trip per server, and returns those
// whose server answered, and the first failure.
func (r *Registry) readPages(ctx context.Context, ps []int) (map[int]*read, error) {
	out := map[int]*read{}
	var errs []error
	r.perServer(ps, func(c *meta.Client, ps []int) {
		var b meta.Batch
		for _, p := range ps {
			b.GetCAS(r.keys[p])
		}
		if err := c.Do(ctx, &b); err != nil {
			errs = append(errs, err)
			return
		}
		for i, p := range ps {
			rep := b.Replies[i]
			switch {
			case rep.Err() != nil:
				errs = append(errs, rep.Err())
			case rep.Status == meta.StatusValue:
				data := bytes.Clone(rep.Value)
				pg, ok := decodePage(data)
				if !ok {
					pg = page{} // written by something else: overwritten with what this process knows
				}
				out[p] = &read{pg: pg, data: data, cas: rep.CAS, found: true}
			default:
				out[p] = &read{pg: page{}}
			}
		}
	})
	return out, errors.Join(errs...)
}

// perServer calls fn with each server's client and its pages among ps.
func (r *Registry) perServer(ps []int, fn func(c *meta.Client, ps []int)) {
	byServer := make([][]int, len(r.clients))
	for _, p := range ps {
		i := p % len(r.clients)
		byServer[i] = append(byServer[i], p)
	}
	for i, sp := range byServer {
		if len(sp) > 0 {
			fn(r.clients[i], sp)
		}
	}
}

// writePage writes data as page p if it is still as rd was read, and
// returns its new token; errConflict if another write came first.
func (r *Registry) writePage(ctx context.Context, p int, data []byte, rd *read) (uint64, error) {
	var b meta.Batch
	if rd.found {
		b.CompareAndSet(r.keys[p], data, meta.NoExpiry, rd.cas)
	} else {
		b.Add(r.keys[p], data, meta.NoExpiry)
	}
	if err := r.client(p).Do(ctx, &b); err != nil {
		return 0, err
	}
	rep := b.Replies[0]
	switch {
	case rep.Err() != nil:
		return 0, rep.Err()
	case rep.Status == meta.StatusOK:
		r.writes.Add(1)
		return rep.CAS, nil
	}
	return 0, errConflict // EX, NS, NF: the page changed, appeared or went
}

// flush writes the pages that hold changes of this process memcached has
// not taken.
func (r *Registry) flush(ctx context.Context) error {
	var errs []error
	for p := range r.keys {
		r.mu.Lock()
		dirty := r.dirty[p] != 0
		r.mu.Unlock()
		if dirty {
			errs = append(errs, r.syncPage(ctx, p, nil))
		}
	}
	return errors.Join(errs...)
}

// run polls until ctx is done.
func (r *Registry) run(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(r.pollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = r.poll(ctx) // what fails is tried again next time
		}
	}
}

// poll reads every page's token, one round trip per server, then the
// pages that changed since this process last read them, that it has
// changes for, or that are missing while it knows entries of them, and
// syncs those.
func (r *Registry) poll(ctx context.Context) error {
	r.polls.Add(1)
	all := make([]int, len(r.keys))
	for p := range all {
		all[p] = p
	}
	tokens := map[int]uint64{}
	var errs []error
	r.perServer(all, func(c *meta.Client, ps []int) {
		var b meta.Batch
		for _, p := range ps {
			b.Token(r.keys[p])
		}
		if err := c.Do(ctx, &b); err != nil {
			errs = append(errs, err)
			return
		}
		for i, p := range ps {
			if err := b.Replies[i].Err(); err != nil {
				errs = append(errs, err)
				continue
			}
			tokens[p] = b.Replies[i].CAS // 0 for EN: missing
		}
	})
	var todo []int
	r.mu.Lock()
	for p, tok := range tokens {
		if tok != r.tokens[p] || r.dirty[p] != 0 || tok == 0 && len(r.pages[p]) > 0 {
			todo = append(todo, p)
		}
	}
	r.mu.Unlock()
	slices.Sort(todo)
	reads, err := r.readPages(ctx, todo)
	errs = append(errs, err)
	for _, p := range todo {
		if rd := reads[p]; rd != nil {
			errs = append(errs, r.syncPage(ctx, p, rd))
		}
	}
	return errors.Join(errs...)
}
