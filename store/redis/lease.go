package redis

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
)

//go:embed lease.lua
var leaseLua string

var leaseScript = newScript(leaseLua)

// leaseStateID ends the name of a lease table's key in place of a limit's
// StateID ("lease" in ASCII), so that it never names a rate state.
const leaseStateID = 0x6c65617365

var _ sluice.LeaseStore = (*Store)(nil)

// LeaseKey returns the name of the sorted set that holds the leases of
// prefix+key: Key's form with the StateID 000000_6c65617365 ("lease").
// One key per table, so Redis Cluster puts each on one slot.
func LeaseKey(prefix, key string) string {
	return string(appendKey(nil, prefix, key, leaseStateID))
}

// Acquire grants a lease in one script call (EVALSHA): the expired leases
// of the key's sorted set are dropped (ZREMRANGEBYSCORE), the live ones
// counted (ZCARD) and the lease added (ZADD) atomically, at the server's
// TIME unless r.Now is set. See sluice.LeaseStore.
func (s *Store) Acquire(ctx context.Context, r sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return s.lease(ctx, &r, "acquire", 1)
}

// Release ends a lease in one script call; see sluice.LeaseStore.
func (s *Store) Release(ctx context.Context, r sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return s.lease(ctx, &r, "release", 2)
}

// Extend renews a live lease in one script call; see sluice.LeaseStore.
func (s *Store) Extend(ctx context.Context, r sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return s.lease(ctx, &r, "extend", 3)
}

func (s *Store) lease(ctx context.Context, r *sluice.LeaseRequest, op string, code int) (sluice.LeaseDecision, error) {
	if err := r.Validate(op); err != nil {
		return sluice.LeaseDecision{}, err
	}
	now := int64(-1)
	if !r.Now.IsZero() {
		now = micros(r.Now.UnixNano())
	}
	keys := []string{LeaseKey(r.Prefix, r.Key)}
	args := []string{strconv.Itoa(code), r.ID, strconv.Itoa(r.EffectiveCeiling()),
		strconv.FormatInt(ceilMicros(int64(r.TTL)), 10), strconv.FormatInt(now, 10), strconv.FormatInt(s.slack, 10)}
	v, err := s.evalInts(ctx, leaseScript, keys, args)
	if err != nil {
		return sluice.LeaseDecision{}, fmt.Errorf("%w: redis: lease %s: %w", sluice.ErrStore, op, err)
	}
	if len(v) != 5 || v[0] < 0 || v[0] > 1 || v[1] < 0 || v[4] <= 0 {
		return sluice.LeaseDecision{}, fmt.Errorf("%w: redis: lease %s: %w %v", sluice.ErrStore, op, errReply, v)
	}
	d := sluice.LeaseDecision{Allowed: v[0] == 1, InUse: int(v[1]), Limit: r.Limit, Time: time.UnixMicro(v[4])}
	if d.Allowed && v[2] > 0 {
		d.Expires = time.UnixMicro(v[2])
	}
	if !d.Allowed && op == "acquire" && v[3] > 0 {
		d.RetryAfter = time.Duration(v[3]-v[4]) * time.Microsecond
	}
	return d, nil
}

// A script is a Lua script of the store's, for either client.
type script struct {
	rueidis *rueidis.Lua
	goRedis *goredis.Script
}

func newScript(src string) script {
	return script{rueidis: rueidis.NewLuaScript(src), goRedis: goredis.NewScript(src)}
}

// evalInts runs sc on the store's client, and returns its answer, a
// list of integers.
func (s *Store) evalInts(ctx context.Context, sc script, keys, args []string) ([]int64, error) {
	switch c := s.c.(type) {
	case *rueidisClient:
		return sc.rueidis.Exec(ctx, c.c, keys, args).AsIntSlice()
	case *goRedisClient:
		return sc.goRedis.Run(ctx, c.c, keys, anys(args)...).Int64Slice()
	}
	return nil, fmt.Errorf("%w: client %T", errReply, s.c)
}
