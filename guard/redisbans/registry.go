package redisbans

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
)

var (
	//go:embed put.lua
	putLua string
	//go:embed prune.lua
	pruneLua string

	putScript   = goredis.NewScript(putLua)
	pruneScript = goredis.NewScript(pruneLua)
)

// Defaults of Config.
const (
	// DefaultPrefix names the registry's keys when Config.Prefix is empty.
	DefaultPrefix = "sluice:bans"
	// DefaultPageSize is how many bans one round trip of List reads when
	// Config.PageSize is zero.
	DefaultPageSize = 500
)

// pruneBatch bounds how many lapsed bans one script call drops, so that a
// call stays short (Redis runs scripts alone) and within Lua's unpack
// limit.
const pruneBatch = 1000

// Config configures a Registry. The zero value of each field but Client
// means its default.
type Config struct {
	// Client is the Redis connection: a *redis.Client, a
	// *redis.ClusterClient (both keys of a registry share one hash slot),
	// a failover client for Sentinel, or any redis.UniversalClient.
	// Required; the Registry does not close it.
	Client goredis.UniversalClient
	// Prefix names the registry: its keys are "{Prefix}:bans" and
	// "{Prefix}:until". Processes that share a Prefix share one list.
	// Default DefaultPrefix.
	Prefix string
	// PageSize is how many bans List asks for per round trip (HSCAN's
	// COUNT). Default DefaultPageSize.
	PageSize int
}

// A Registry is a guard.Registry in Redis: every process of a fleet
// writes its bans to it and lists the same bans, whoever made them, and
// any process can lift any ban (Jail.Lift deletes it here).
//
// Bans are kept in a hash, one field per jail and key holding the reason,
// start, end and offence count, beside a sorted set of the same fields
// scored by the ban's end. Put and List drop the bans that have lapsed
// (by the caller's clock, as guard.Registry asks), in batches, and both
// keys expire when the last ban lapses, so an idle registry leaves
// nothing behind. List scans the hash page by page (HSCAN), so a large
// registry never blocks Redis.
//
// The Registry holds what a sluice Store cannot (reasons, and a list to
// enumerate); the bans themselves are enforced from the Store. Errors
// wrap sluice.ErrStore. The zero value is not usable; create Registries
// with New. A Registry is safe for concurrent use.
type Registry struct {
	c        goredis.UniversalClient
	keys     []string // the hash and the sorted set
	pageSize int64
	set      guard.BanSet // the bans this process enforces
}

var _ guard.Registry = (*Registry)(nil)

// New returns a Registry on c.Client, or an error wrapping
// sluice.ErrInvalidRequest if it is missing.
func New(c Config) (*Registry, error) {
	if c.Client == nil {
		return nil, fmt.Errorf("%w: redisbans: no Client", sluice.ErrInvalidRequest)
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.PageSize <= 0 {
		c.PageSize = DefaultPageSize
	}
	tag := "{" + c.Prefix + "}"
	return &Registry{c: c.Client, keys: []string{tag + ":bans", tag + ":until"}, pageSize: int64(c.PageSize)}, nil
}

// record is what the hash holds per ban; the jail and key are in the
// field, byte for byte.
type record struct {
	Reason   string `json:"reason"`
	Since    int64  `json:"since"` // Unix ns
	Until    int64  `json:"until"` // Unix ns
	Offences int    `json:"offences"`
}

// field names a ban in both keys: the jail's length, a colon, the jail,
// then the key, so that any bytes in either stay apart.
func field(jail, key string) string {
	return strconv.Itoa(len(jail)) + ":" + jail + key
}

// parseField splits a field into jail and key.
func parseField(f string) (jail, key string, ok bool) {
	n, rest, ok := strings.Cut(f, ":")
	if !ok {
		return "", "", false
	}
	l, err := strconv.Atoi(n)
	if err != nil || l < 0 || l > len(rest) {
		return "", "", false
	}
	return rest[:l], rest[l:], true
}

// ceilMilli and floorMilli convert times to the sorted set's Unix ms: a
// ban's end rounded up and now rounded down, so that a ban still in force
// by a fraction of a millisecond is never dropped.
func ceilMilli(t time.Time) int64 {
	ns := t.UnixNano()
	ms := ns / 1e6
	if ns%1e6 > 0 {
		ms++
	}
	return ms
}

func floorMilli(t time.Time) int64 {
	ns := t.UnixNano()
	ms := ns / 1e6
	if ns%1e6 < 0 {
		ms--
	}
	return ms
}

// Put records b, replacing any ban of the same jail and key, and drops
// bans that lapsed by b.Since.
func (r *Registry) Put(ctx context.Context, b guard.Ban) (guard.Ban, error) {
	b, err := r.set.Put(b, time.Time{})
	if err != nil {
		return b, err
	}
	return b, r.put(ctx, b)
}

func (r *Registry) put(ctx context.Context, b guard.Ban) error {
	rec, err := json.Marshal(record{Reason: b.Reason, Since: b.Since.UnixNano(), Until: b.Until.UnixNano(), Offences: b.Offences})
	if err != nil {
		return fmt.Errorf("%w: redisbans: %v", sluice.ErrInvalidRequest, err)
	}
	now := b.Since
	if now.IsZero() {
		now = time.Now()
	}
	err = putScript.Run(ctx, r.c, r.keys, field(b.Jail, b.Key), rec, ceilMilli(b.Until), floorMilli(now), pruneBatch).Err()
	if err != nil {
		return fmt.Errorf("%w: redisbans: put: %w", sluice.ErrStore, err)
	}
	return nil
}

// Bans returns the set this process enforces from.
func (r *Registry) Bans() *guard.BanSet { return &r.set }

// Delete forgets the ban of key in jail, if any.
func (r *Registry) Delete(ctx context.Context, jail, key string) error {
	r.set.Delete(jail, key)
	f := field(jail, key)
	_, err := r.c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.HDel(ctx, r.keys[0], f)
		p.ZRem(ctx, r.keys[1], f)
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: redisbans: delete: %w", sluice.ErrStore, err)
	}
	return nil
}

// List returns the bans in force at now, by jail and key, after dropping
// those that lapsed. A record that does not parse (written by something
// else) is skipped.
func (r *Registry) List(ctx context.Context, now time.Time) ([]guard.Ban, error) {
	for {
		n, err := pruneScript.Run(ctx, r.c, r.keys, floorMilli(now), pruneBatch).Int()
		if err != nil {
			return nil, fmt.Errorf("%w: redisbans: prune: %w", sluice.ErrStore, err)
		}
		if n < pruneBatch {
			break
		}
	}
	seen := map[string]bool{} // HSCAN may return a field twice
	var out []guard.Ban
	var cursor uint64
	for {
		kv, next, err := r.c.HScan(ctx, r.keys[0], cursor, "", r.pageSize).Result()
		if err != nil {
			return nil, fmt.Errorf("%w: redisbans: list: %w", sluice.ErrStore, err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			f, v := kv[i], kv[i+1]
			if seen[f] {
				continue
			}
			seen[f] = true
			b, ok := decode(f, v)
			if ok && b.Until.After(now) {
				out = append(out, b)
			}
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	slices.SortFunc(out, func(a, b guard.Ban) int {
		if c := strings.Compare(a.Jail, b.Jail); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out, nil
}

func decode(f, v string) (guard.Ban, bool) {
	jail, key, ok := parseField(f)
	if !ok {
		return guard.Ban{}, false
	}
	var rec record
	if err := json.Unmarshal([]byte(v), &rec); err != nil {
		return guard.Ban{}, false
	}
	return guard.Ban{Jail: jail, Key: key, Reason: rec.Reason, Since: time.Unix(0, rec.Since), Until: time.Unix(0, rec.Until), Offences: rec.Offences}, true
}
