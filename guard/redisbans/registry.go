package redisbans

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/banfield"
)

var (
	//go:embed put.lua
	putLua string
	//go:embed lift.lua
	liftLua string
	//go:embed prune.lua
	pruneLua string
	//go:embed head.lua
	headLua string

	putScript   = newScript(putLua)
	liftScript  = newScript(liftLua)
	pruneScript = newScript(pruneLua)
	headScript  = newScript(headLua)
)

// A script is a Lua script of the registry, run with EVALSHA, and with
// EVAL where Redis lacks it (a restart, a SCRIPT FLUSH).
type script struct {
	lua *rueidis.Lua
	sha string
}

func newScript(src string) script {
	sum := sha1.Sum([]byte(src))
	return script{lua: rueidis.NewLuaScript(src), sha: hex.EncodeToString(sum[:])}
}

// exec runs s once.
func (s script) exec(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	return s.lua.Exec(ctx, c, keys, args)
}

// execMulti runs calls of s pipelined, one round trip per server, in
// order. Unlike rueidis' Lua.ExecMulti, it sends no SCRIPT LOAD, whose
// retries race with the recycling of commands when a connection breaks
// (seen by the race detector as Redis restarted); a call that finds the
// script missing is run again, alone, with EVAL.
func (s script) execMulti(ctx context.Context, c rueidis.Client, calls []rueidis.LuaExec) []rueidis.RedisResult {
	cmds := make(rueidis.Commands, len(calls))
	for i, call := range calls {
		cmds[i] = c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(call.Keys))).Key(call.Keys...).Arg(call.Args...).Build()
	}
	res := c.DoMulti(ctx, cmds...)
	for i := range res {
		if err, ok := rueidis.IsRedisErr(res[i].Error()); ok && err.IsNoScript() {
			res[i] = s.exec(ctx, c, calls[i].Keys, calls[i].Args)
		}
	}
	return res
}

// Defaults of Config.
const (
	// DefaultPrefix names the registry's keys when Config.Prefix is empty.
	DefaultPrefix = "sluice:bans"
	// DefaultPageSize is how many bans one round trip of List or of a
	// load reads when Config.PageSize is zero.
	DefaultPageSize = 500
	// DefaultLogLength is how many changes the change log keeps when
	// Config.LogLength is zero: a replica further behind reloads.
	DefaultLogLength = 10_000
	// DefaultMaxPending bounds the writes kept for retry when
	// Config.MaxPending is zero.
	DefaultMaxPending = 10_000
	// DefaultCheckEvery is how often an idle replica checks that Redis
	// still holds its bans when Config.CheckEvery is zero.
	DefaultCheckEvery = 5 * time.Second
)

// Internal bounds.
const (
	// pruneBatch bounds how many lapsed bans one script call drops, so
	// that a call stays short (Redis runs scripts alone) and within Lua's
	// unpack limit.
	pruneBatch = 1000
	// mergeChunk bounds the merged bans one put deletes; the rest follow
	// in further calls, for the same reasons.
	mergeChunk = 1000
	// followBlock bounds each blocking read of the change log, and so
	// how long a failed write waits for its retry.
	followBlock = time.Second
	// followCount bounds the entries one read of the change log returns.
	followCount = 1000
	// minBackoff and maxBackoff bound the wait between attempts while
	// Redis fails.
	minBackoff, maxBackoff = 50 * time.Millisecond, time.Second
	// closeFlush bounds Close's last attempt to write pending changes.
	closeFlush = 2 * time.Second
)

// Config configures a Registry. The zero value of each field but Client
// means its default.
type Config struct {
	// Client is the Redis connection, a rueidis client of a single
	// server, of a Cluster (the registry's keys share one hash slot) or
	// of Sentinel's master: the Redis store's own client will do.
	// Required; the Registry does not close it.
	Client rueidis.Client
	// Prefix names the registry: its keys are "{Prefix}:bans",
	// "{Prefix}:until", "{Prefix}:lifts", "{Prefix}:version" and
	// "{Prefix}:log". Processes that share a Prefix share the bans.
	// Default DefaultPrefix.
	Prefix string
	// PageSize is how many bans List and a load ask for per round trip
	// (HSCAN's COUNT). Default DefaultPageSize.
	PageSize int
	// Limits bound the bans this process holds (guard.BanSet): give
	// every process of a fleet the same. Default: the zero
	// guard.BanLimits, its defaults.
	Limits guard.BanLimits
	// Spare is the list whose addresses no coarsening covers (the allow
	// list; see guard.BanSet.Spare), from the first load on. Default
	// none.
	Spare *guard.List
	// LogLength is how many changes the change log keeps, about (XADD
	// MAXLEN ~). A replica that falls further behind reloads every ban.
	// Default DefaultLogLength.
	LogLength int
	// MaxPending bounds the changes kept for retry while Redis fails.
	// Default DefaultMaxPending. Beyond it, a ban is still enforced here
	// and written back when Redis answers again; a lift is lost, and the
	// ban comes back from Redis (a lift fails safe, as a ban).
	MaxPending int
	// CheckEvery is how often a replica with nothing to read checks that
	// Redis still holds its bans (a restart without persistence, an
	// eviction) and writes them back if not. Default DefaultCheckEvery.
	CheckEvery time.Duration
	// Clock returns the time lapsed bans are judged at when the registry
	// loads, writes back and lifts; Put and List judge by the time they
	// are given. Default time.Now.
	Clock func() time.Time
}

// A Registry is a guard.Registry in Redis: every process of a fleet
// holds a replica of the fleet's bans in a guard.BanSet, enforces from
// it without a round trip, and writes its own bans and lifts through to
// Redis, whence they reach the other processes within milliseconds.
//
// # Replication
//
// Every Put and Delete runs one script that updates the bans in Redis
// and appends the change to a change log (a stream) under a version
// counter, atomically. New loads every ban (HSCAN, page by page) before
// it returns; then a goroutine follows the log (blocking XREAD) and
// applies each change to the set. A replica that finds a gap in the
// versions (the log was trimmed past it, Redis restarted, a failover lost
// writes), loses its connection, or finds Redis without the bans it
// holds (checked every CheckEvery) reloads the whole set. A stream, not
// Pub/Sub, because a replica that was away can tell what it missed.
//
// # Failures
//
// Put and Delete change the local set first: the process that bans
// enforces at once, whatever Redis does. If the write fails, the call
// returns an error wrapping sluice.ErrStore and the change is kept
// (up to MaxPending) and written again when Redis answers. After every
// reload, bans this process holds that Redis lacks (lost by a restart
// without persistence, an eviction or a failover), with no lift marked
// and no network ban in Redis covering them as long, are written back,
// unless Redis holds a change of the same jail and key by then: a ban is
// lost only if Redis loses it and every process that held it stops.
//
// # Races
//
// Redis orders the scripts, and every replica applies the log in that
// order: the latest write to Redis of a jail and key wins everywhere,
// whether two processes ban one key or a lift races a ban. Until the log
// reaches it, a process enforces its own write. A lift leaves a mark
// until the lifted ban would have ended, so that no process writes the
// ban back; a later ban replaces the mark.
//
// # Capacity
//
// A Put that the set coarsens at capacity (guard.BanSet) is written as
// the network ban, and the bans merged into it are deleted in Redis by
// the same change, so replicas converge and Redis holds no more than a
// set does; a merge elsewhere that made room for the ban is written
// first, the same way, then the ban. A replica whose set coarsens a ban
// it applies (it held bans the writer's set did not yet, or it has
// smaller Limits) writes that network ban the same way: whatever a
// process enforces, Redis holds, and a ban a jail skipped because a
// network ban covered it is never lost with that network ban. A merged
// ban's collateral (guard.Ban.Collateral) travels with it; processes of
// earlier versions ignore it.
//
// Errors wrap sluice.ErrStore. The zero value is not usable; create
// Registries with New and stop them with Close. A Registry is safe for
// concurrent use.
type Registry struct {
	c          rueidis.Client
	keys       []string // keyBans, keyUntil, keyLifts, keyVersion, keyLog
	pageSize   int64
	logLength  string
	maxPending int
	checkEvery time.Duration
	clock      func() time.Time
	set        guard.BanSet

	mu      sync.Mutex     // orders changes of set with pending
	pending map[string]*op // changes Redis has not confirmed, by field
	// merged holds the fields of the bans this process's set merged into
	// wider ones, until the follower applies the deletes its merge logged:
	// a put of one of them that the log holds before those deletes is
	// one Redis deleted, and is not applied (the follower met this
	// process's own earlier puts after it merged them, and put them back).
	merged map[string]struct{}
	seq    uint64      // of the last op
	retry  atomic.Bool // a write failed: flush pending
	dirty  atomic.Bool // a change found pending full: reload and write back

	// The log's position: owned by the follower, or by New before it
	// starts.
	last    string       // ID of the last entry applied
	version atomic.Int64 // its version, read by Stats
	behind  int64        // the version applied when a check last found Redis ahead, or -1

	cancel    context.CancelFunc
	done      chan struct{} // closed when the follower returns
	closeOnce sync.Once
	closeErr  error

	resyncs, applied, writtenBack, dropped atomic.Int64
}

// The registry's keys, in the order the scripts take them.
const (
	keyBans = iota
	keyUntil
	keyLifts
	keyVersion
	keyLog
)

var _ guard.Registry = (*Registry)(nil)

// New returns a Registry on c.Client holding every ban Redis holds, and
// starts its replica following the changes of the other processes. The
// error wraps sluice.ErrInvalidRequest if the client is missing, and
// sluice.ErrStore if Redis does not answer the load.
func New(ctx context.Context, c Config) (*Registry, error) {
	if c.Client == nil {
		return nil, fmt.Errorf("%w: redisbans: no Client", sluice.ErrInvalidRequest)
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	tag := "{" + c.Prefix + "}"
	r := &Registry{
		c:          c.Client,
		keys:       []string{tag + ":bans", tag + ":until", tag + ":lifts", tag + ":version", tag + ":log"},
		pageSize:   int64(positive(c.PageSize, DefaultPageSize)),
		logLength:  fmt.Sprint(positive(c.LogLength, DefaultLogLength)),
		maxPending: positive(c.MaxPending, DefaultMaxPending),
		checkEvery: positive(c.CheckEvery, DefaultCheckEvery),
		clock:      c.Clock,
		set:        guard.BanSet{BanLimits: c.Limits},
		pending:    map[string]*op{},
		merged:     map[string]struct{}{},
		done:       make(chan struct{}),
		behind:     -1,
	}
	if r.clock == nil {
		r.clock = time.Now
	}
	r.set.Spare(c.Spare)
	if err := r.resync(ctx); err != nil {
		return nil, err
	}
	fctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.follow(fctx)
	return r, nil
}

func positive[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// Close stops the replica and makes a last attempt, within a few
// seconds, to write the changes Redis has not confirmed; the error wraps
// sluice.ErrStore if some are left. Calls after the first return its
// result. The Registry still answers Put, Delete and List.
func (r *Registry) Close() error {
	r.closeOnce.Do(func() {
		r.cancel()
		<-r.done
		ctx, cancel := context.WithTimeout(context.Background(), closeFlush)
		defer cancel()
		r.closeErr = r.flush(ctx)
	})
	return r.closeErr
}

// Bans returns the set this process enforces from.
func (r *Registry) Bans() *guard.BanSet { return &r.set }

// Put records b in this process's set, then in Redis, replacing any ban
// of the same jail and key, and drops the bans in Redis that lapsed by
// b.Since. It returns the ban as recorded (see guard.BanSet.Put). If
// Redis fails, the ban is enforced here all the same and written later;
// the error wraps sluice.ErrStore.
func (r *Registry) Put(ctx context.Context, b guard.Ban) (guard.Ban, error) {
	r.mu.Lock()
	rec, m, err := r.set.PutMerged(b, time.Time{})
	if err != nil {
		r.mu.Unlock()
		return rec, fmt.Errorf("redisbans: %w", err)
	}
	var ops []*op
	for _, o := range putOps(rec, m) {
		ops = append(ops, r.queue(o))
	}
	r.mu.Unlock()
	for _, o := range ops {
		if _, err := r.write(ctx, o); err != nil {
			r.retry.Store(true)
			return rec, fmt.Errorf("%w: redisbans: put (enforced here, to be written again): %w", sluice.ErrStore, err)
		}
		r.confirm(o)
	}
	return rec, nil
}

// Delete lifts the ban of key in jail, here and in Redis. The error
// wraps guard.ErrNotBanned if neither held one, and sluice.ErrStore if
// Redis failed (the ban is lifted here all the same and the lift written
// later).
func (r *Registry) Delete(ctx context.Context, jail, key string) error {
	key = guard.BanKey(key)
	r.mu.Lock()
	old, held := r.set.Get(jail, key)
	r.set.Delete(jail, key)
	o := r.queue(&op{field: banfield.Name(jail, key), lift: true, ban: guard.Ban{Jail: jail, Key: key, Until: old.Until}})
	r.mu.Unlock()
	inRedis, err := r.write(ctx, o)
	if err != nil {
		r.retry.Store(true)
		return fmt.Errorf("%w: redisbans: lift (lifted here, to be written again): %w", sluice.ErrStore, err)
	}
	r.confirm(o)
	if !held && !inRedis {
		return fmt.Errorf("redisbans: %w: %q in jail %q", guard.ErrNotBanned, key, jail)
	}
	return nil
}

// List returns the bans in Redis in force at now, by jail and key, after
// dropping those that lapsed. A record that does not parse (written by
// something else) is skipped.
func (r *Registry) List(ctx context.Context, now time.Time) ([]guard.Ban, error) {
	for {
		n, err := pruneScript.exec(ctx, r.c, r.keys[:keyVersion], []string{fmt.Sprint(floorMilli(now)), fmt.Sprint(pruneBatch)}).AsInt64()
		if err != nil {
			return nil, fmt.Errorf("%w: redisbans: prune: %w", sluice.ErrStore, err)
		}
		if n < pruneBatch {
			break
		}
	}
	var out []guard.Ban
	err := r.scan(ctx, r.keys[keyBans], func(f, v string) {
		if b, ok := decode(f, v); ok && b.Until.After(now) {
			out = append(out, b)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("%w: redisbans: list: %w", sluice.ErrStore, err)
	}
	sortBans(out)
	return out, nil
}

// scan calls fn with each field and value of the hash key, once each,
// reading a page per round trip.
func (r *Registry) scan(ctx context.Context, key string, fn func(f, v string)) error {
	seen := map[string]bool{} // HSCAN may return a field twice
	var cursor uint64
	for {
		// Not retried by the client (a read it would retry), so that a
		// load over a broken connection fails rather than mixes servers.
		cmd := r.c.B().Arbitrary("HSCAN").Keys(key).Args(strconv.FormatUint(cursor, 10), "COUNT", strconv.FormatInt(r.pageSize, 10)).Build()
		e, err := r.c.Do(ctx, cmd).AsScanEntry()
		if err != nil {
			return err
		}
		for i := 0; i+1 < len(e.Elements); i += 2 {
			if f := e.Elements[i]; !seen[f] {
				seen[f] = true
				fn(f, e.Elements[i+1])
			}
		}
		if e.Cursor == 0 {
			return nil
		}
		cursor = e.Cursor
	}
}

// Stats are a Registry's counts, beside those of its set (Bans().Stats).
type Stats struct {
	// Pending is how many changes Redis has not confirmed yet.
	Pending int
	// Version is the number of the last change of the log applied.
	Version int64
	// Resyncs counts whole loads: at start, after a gap in the log, a
	// lost connection, or Redis found without the bans.
	Resyncs int64
	// Applied counts the log's changes applied to the set.
	Applied int64
	// WrittenBack counts bans held here that Redis lacked, written back.
	WrittenBack int64
	// Dropped counts changes not kept for retry, pending being full.
	Dropped int64
}

// Stats returns the registry's counts.
func (r *Registry) Stats() Stats {
	r.mu.Lock()
	pending := len(r.pending)
	r.mu.Unlock()
	return Stats{Pending: pending, Version: r.version.Load(), Resyncs: r.resyncs.Load(), Applied: r.applied.Load(),
		WrittenBack: r.writtenBack.Load(), Dropped: r.dropped.Load()}
}

// errGap means the log skipped versions: the replica must reload.
var errGap = errors.New("redisbans: gap in the change log")
