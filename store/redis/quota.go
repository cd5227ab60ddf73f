package redis

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

//go:embed quota.lua
var quotaLua string

var quotaScript = newScript(quotaLua)

var _ sluice.QuotaStore = (*Store)(nil)

// QuotaKey returns the name of the hash that holds the shares of
// prefix+key's limit l: Key's form with sluice.QuotaStateID(l). One key
// per table, so Redis Cluster puts each on one slot.
func QuotaKey(prefix, key string, l sluice.Limit) string {
	return string(appendKey(nil, prefix, key, sluice.QuotaStateID(l)))
}

// Share grants, renews or releases a holder's share in one script call
// (EVALSHA): the expired shares of the key's hash are dropped, the
// holder's demand recorded and its share computed from the whole table
// (algorithm.QuotaTable's division, its Hysteresis written out, in
// microseconds) atomically, at the
// server's TIME unless r.Now is set, so every process on the Redis
// divides one limit. See sluice.QuotaStore.
func (s *Store) Share(ctx context.Context, r sluice.ShareRequest) (sluice.Share, error) {
	if err := r.Validate(); err != nil {
		return sluice.Share{}, err
	}
	now, ttl := int64(-1), int64(0)
	if !r.Now.IsZero() {
		now = micros(r.Now.UnixNano())
	}
	if !r.Release {
		ttl = max(ceilMicros(int64(r.TTL)), 1)
	}
	keys := []string{QuotaKey(r.Prefix, r.Key, r.Limit)}
	args := []string{r.Holder, strconv.Itoa(r.Demand), strconv.Itoa(r.Limit.Rate), strconv.FormatInt(ttl, 10),
		strconv.FormatInt(now, 10), strconv.Itoa(sluice.MaxQuotaHolders), strconv.FormatInt(s.slack, 10), strconv.Itoa(r.Reserve)}
	v, err := s.evalInts(ctx, quotaScript, keys, args)
	if err != nil {
		return sluice.Share{}, fmt.Errorf("%w: redis: quota: %w", sluice.ErrStore, err)
	}
	if len(v) != 7 || v[0] < 0 || v[0] > int64(r.Limit.Rate) || v[1] < 0 || v[5] <= 0 {
		return sluice.Share{}, fmt.Errorf("%w: redis: quota: %w %v", sluice.ErrStore, errReply, v)
	}
	sh := sluice.Share{Rate: int(v[0]), Limit: r.Limit, Holders: int(v[1]), Granted: int(v[2]), Demand: int(v[3]),
		Full: v[6] == 1, Time: time.UnixMicro(v[5])}
	if v[4] > 0 {
		sh.Expires = time.UnixMicro(v[4])
	}
	return sh, nil
}
