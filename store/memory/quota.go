package memory

import (
	"context"
	"hash/maphash"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// quotaShare is the share of MaxBytes the tables of shares may count,
// apart from the states and the leases: a sixteenth.
const quotaShare = 16

// Counted sizes: a table with its map entry, beside its name; a holder
// of it, beside its name.
const (
	quotaTableBytes  = 96
	quotaHolderBytes = 64
)

// quotaShardCount is the number of independently locked parts of the
// tables of shares.
const quotaShardCount = 16

// quotaShards holds the tables of shares of a Store (edge quotas), apart
// from its rate states. A share is never evicted to make room, for a
// forgotten share would be handed out twice: when the tables' share of
// MaxBytes is spent, a new holder is refused (sluice.Share.Full) until
// others expire or are released. Tables whose shares have all expired
// are dropped when found, and by a sweep of every shard, at most every
// fullSweepEvery, before a holder is refused.
type quotaShards struct {
	seed     maphash.Seed
	shards   [quotaShardCount]quotaShard
	max      int64
	bytes    atomic.Int64
	lastFull atomic.Int64 // time of the last sweep of every shard, Unix ns
}

type quotaShard struct {
	mu     sync.Mutex
	tables map[string]*algorithm.QuotaTable
	_      [40]byte
}

func (q *quotaShards) init(maxBytes int64) {
	q.seed = maphash.MakeSeed()
	q.max = maxBytes / quotaShare
	for i := range q.shards {
		q.shards[i].tables = map[string]*algorithm.QuotaTable{}
	}
}

var _ sluice.QuotaStore = (*Store)(nil)

// QuotaBytes returns what the store's tables of shares count against
// their share of MaxBytes (a sixteenth).
func (s *Store) QuotaBytes() int64 { return s.quotas.bytes.Load() }

// Share grants, renews or releases a holder's share of a key's limit;
// see sluice.QuotaStore and algorithm.QuotaTable. It refuses a new
// holder, with Full set, when the tables' share of MaxBytes is spent.
func (s *Store) Share(_ context.Context, r sluice.ShareRequest) (sluice.Share, error) {
	if err := r.Validate(); err != nil {
		return sluice.Share{}, err
	}
	now := r.Now.UnixNano()
	if r.Now.IsZero() {
		now = s.now(false)
	}
	name := r.Prefix + r.Key + ":" + strconv.FormatUint(sluice.QuotaStateID(r.Limit), 16)
	for retry := true; ; retry = false {
		sh := s.quotas.share(name, &r, now)
		if !sh.Full || !retry || !s.quotas.sweepAll(now) {
			sh.Limit, sh.Time = r.Limit, time.Unix(0, now)
			return sh, nil
		}
	}
}

// share applies r to the table name at now, under its shard's lock.
func (q *quotaShards) share(name string, r *sluice.ShareRequest, now int64) sluice.Share {
	sh := &q.shards[maphash.String(q.seed, name)%quotaShardCount]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.tables[name]
	if t != nil {
		q.bytes.Add(-int64(t.Prune(now)) * quotaHolderBytes)
	}
	if r.Release {
		if t != nil && t.Release(r.Holder, now) {
			q.bytes.Add(-quotaHolderBytes)
		}
		return q.answer(sh, name, t, r, 0, now)
	}
	if t == nil || !t.Holds(r.Holder) {
		need := int64(quotaHolderBytes)
		if t == nil {
			need += quotaTableBytes + int64(len(name))
		}
		if q.bytes.Load()+need > q.max {
			res := q.answer(sh, name, t, r, 0, now)
			res.Full = true
			return res
		}
		if t == nil {
			t = &algorithm.QuotaTable{}
			sh.tables[name] = t
			q.bytes.Add(quotaTableBytes + int64(len(name)))
		}
		q.bytes.Add(quotaHolderBytes)
	}
	exp := now + int64(r.TTL)
	rate, ok := t.Share(r.Holder, int64(r.Demand), int64(r.Limit.Rate), int64(r.Reserve), now, exp, sluice.MaxQuotaHolders)
	if !ok {
		q.bytes.Add(-quotaHolderBytes)
	}
	res := q.answer(sh, name, t, r, rate, now)
	if ok {
		res.Expires = time.Unix(0, exp)
	}
	res.Full = !ok
	return res
}

// answer returns the Share of holder rate in table t (nil: none), and
// drops t if it holds no one. Its caller holds sh.mu.
func (q *quotaShards) answer(sh *quotaShard, name string, t *algorithm.QuotaTable, r *sluice.ShareRequest, rate, now int64) sluice.Share {
	res := sluice.Share{Rate: int(rate)}
	if t == nil {
		return res
	}
	res.Holders, res.Granted, res.Demand = len(t.Holders), int(t.Granted()), int(t.Demand(int64(r.Limit.Rate)))
	if len(t.Holders) == 0 {
		delete(sh.tables, name)
		q.bytes.Add(-quotaTableBytes - int64(len(name)))
	}
	return res
}

// sweepAll drops the expired shares and empty tables of every shard, at
// most once per fullSweepEvery, and reports whether it swept.
func (q *quotaShards) sweepAll(now int64) bool {
	last := q.lastFull.Load()
	if now-last < int64(fullSweepEvery) || !q.lastFull.CompareAndSwap(last, now) {
		return false
	}
	for i := range q.shards {
		sh := &q.shards[i]
		sh.mu.Lock()
		for name, t := range sh.tables {
			q.bytes.Add(-int64(t.Prune(now)) * quotaHolderBytes)
			if len(t.Holders) == 0 {
				delete(sh.tables, name)
				q.bytes.Add(-quotaTableBytes - int64(len(name)))
			}
		}
		sh.mu.Unlock()
	}
	return true
}
