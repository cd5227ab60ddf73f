package redis

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

//go:embed onelimit.lua
var oneLimitLua string

//go:embed decide.lua
var decideBody string

//go:embed batch.lua
var entryLua string

// decideLua is the script the Store runs: GCRA and the fixed window of
// one limit (onelimit.lua), the function decide, which decides one request
// (decide.lua), then the entry of batch.lua, which calls it for the
// request of the call, or for each of a batch.
var decideLua = oneLimitLua + "local function decide(kb, A, nk, tnow, W)\n" + decideBody + "\nend\n" + entryLua

// scriptSHA is the SHA-1 that EVALSHA names the script by.
var scriptSHA = sha1Hex(decideLua)

// Script returns the Lua source of the script every Store runs, by
// EVALSHA of its SHA-1: for tools that load or measure it, such as
// redis-benchmark. Its keys and arguments are internal to this package.
func Script() string { return decideLua }

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// MaxFlushDelay is the rueidis ClientOption.MaxFlushDelay of the clients
// New dials, and the one to give a client passed in Config.Client: after
// each write, the client waits up to this long for more commands to send
// with the next, so that under load one system call carries many
// decisions. rueidis suggests 20 µs; at 64 goroutines on two cores, where
// the client and Redis share the CPU, it measured a third more decisions
// per second, with serial latency unchanged.
const MaxFlushDelay = 20 * time.Microsecond

// Config configures a Store. Its zero value dials a Redis server on
// 127.0.0.1:6379.
type Config struct {
	// Addrs are the addresses New dials: one Redis server, or seed nodes
	// of a Redis Cluster (detected by the client). Default
	// ["127.0.0.1:6379"]. Ignored when Client or GoRedis is set.
	Addrs []string
	// Username and Password authenticate the connections New dials.
	// Default none.
	Username, Password string
	// Client is a rueidis client to use instead of dialing Addrs: build
	// one with rueidis.NewClient for TLS, Sentinel (ClientOption.Sentinel)
	// or any other option, and MaxFlushDelay. The Store does not close it.
	// Default nil.
	Client rueidis.Client
	// GoRedis is a go-redis client to use instead: a *Client, a
	// *ClusterClient, a failover (Sentinel) client or a *Ring whose
	// shards hash on key tags. The Store does not close it. Concurrent
	// calls each take a pooled connection; rueidis pipelines them over
	// shared connections instead, which measured faster (see the package
	// documentation). Default nil.
	GoRedis goredis.UniversalClient
	// TTLSlack is how much longer than its state needs each key is kept
	// before Redis expires it, so that a client whose clock runs behind
	// the server's, or a test on a frozen clock, does not see its state
	// vanish early. Default 1s; negative means none.
	TTLSlack time.Duration
	// InFlight is how many calls of Decide may be on their way to Redis
	// at once; while that many are, further GCRA takes and peeks queue,
	// and are sent together, in one round trip and few script calls, as
	// soon as one comes back. Under load this cuts Redis's CPU time per
	// decision by up to two thirds; an idle store sends each request at
	// once, alone. Each request is still decided atomically on its own.
	// Default 0: DefaultInFlight. Negative: no queue, every Decide is
	// sent at once (each is then still pipelined with the others on the
	// client's connections).
	InFlight int
}

// DefaultInFlight is the InFlight of a Config that leaves it zero. Redis
// runs one script at a time: beyond a call being decided and one on the
// wire, more calls in flight only wait in its socket, while the batches
// behind them shrink. At 64 goroutines on loopback (bench/,
// BenchmarkRedis, two series), 2 in flight decided 2-9% more than 4 and
// cost Redis 8% less CPU per decision on a hot key; 1 decided 1-8% more
// again, but leaves Redis idle while a batch travels, which a round trip
// longer than loopback's makes costly: set InFlight to 1 for a Redis on
// the same host.
const DefaultInFlight = 2

// A Store keeps limiter state in Redis and decides each request with one
// Lua script call (EVALSHA): one network round trip, atomic on the
// server, for every algorithm and for multi-limit policies. By default
// times come from the Redis server's clock (TIME), so application servers
// with skewed clocks agree; a Request.Now overrides it.
//
// The script works in microseconds: request times are truncated to a
// whole microsecond, and a limit's emission interval (GCRA), period and
// sub-window width are rounded up to one, so a limit finer than that is
// applied a little more strictly than package algorithm would, never more
// leniently. Limits whose intervals and periods are whole microseconds,
// on whole-microsecond times, get exactly the decisions of package
// algorithm.
//
// Create a Store with New; the zero value is not usable. A Store is safe
// for concurrent use; concurrent decisions share connections and round
// trips (auto-pipelining).
type Store struct {
	c        client
	owned    bool
	slack    int64 // ms
	batching grouping
	perCall  int        // most requests of a batch one script call decides
	co       *coalescer // nil when Config.InFlight is negative
}

var (
	_ sluice.Store   = (*Store)(nil)
	_ sluice.Batcher = (*Store)(nil)
)

// New returns a Store on the client c names, dialing Addrs when it names
// none. Dialing fails when no server answers.
func New(c Config) (*Store, error) {
	s := &Store{slack: int64(time.Second / time.Millisecond), perCall: maxPerCall}
	if c.TTLSlack != 0 {
		s.slack = max(int64((c.TTLSlack+time.Millisecond-1)/time.Millisecond), 0)
	}
	switch {
	case c.Client != nil && c.GoRedis != nil:
		return nil, fmt.Errorf("%w: redis: set Client or GoRedis, not both", sluice.ErrInvalidRequest)
	case c.Client != nil:
		s.c = newRueidisClient(c.Client)
	case c.GoRedis != nil:
		s.c = newGoRedisClient(c.GoRedis)
	default:
		addrs := c.Addrs
		if len(addrs) == 0 {
			addrs = []string{"127.0.0.1:6379"}
		}
		rc, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress:   addrs,
			Username:      c.Username,
			Password:      c.Password,
			DisableCache:  true,
			MaxFlushDelay: MaxFlushDelay,
		})
		if err != nil {
			return nil, fmt.Errorf("%w: redis: %w", sluice.ErrStore, err)
		}
		s.c, s.owned = newRueidisClient(rc), true
	}
	s.batching = s.c.grouping()
	switch {
	case c.InFlight == 0:
		s.co = &coalescer{s: s, max: DefaultInFlight}
	case c.InFlight > 0:
		s.co = &coalescer{s: s, max: c.InFlight}
	}
	return s, nil
}

// Close closes the client New dialed; a client passed in Config stays
// open.
func (s *Store) Close() error {
	if s.owned {
		s.c.close()
	}
	return nil
}

// Decide decides r in one script call; see sluice.Store.
func (s *Store) Decide(ctx context.Context, r sluice.Request) (sluice.Decision, error) {
	if err := check(&r); err != nil {
		return sluice.Decision{}, err
	}
	if s.co != nil && batchable(&r) {
		return s.co.decide(ctx, &r)
	}
	keys, args := s.encode(&r)
	reply, err := s.c.eval(ctx, keys, args)
	return decodeReply(&r, reply, err)
}

// maxCount bounds a limit's Rate and MaxBurst, so that counts stay exact
// in the script's doubles.
const maxCount = 1 << 50

// check validates r for the script.
func check(r *sluice.Request) error {
	if err := r.Validate(); err != nil {
		return err
	}
	for _, l := range r.Limits {
		if l.MaxBurst() > maxCount {
			return fmt.Errorf("%w: redis: rate %d is more than the Redis store counts exactly (%d)", sluice.ErrInvalidLimit, l.MaxBurst(), int64(maxCount))
		}
	}
	return nil
}

// encode returns the script's keys and arguments for r, which check
// accepted. Every key and argument is cut from one string: two
// allocations per request, the buffers of a small policy on the stack.
func (s *Store) encode(r *sluice.Request) (keys, args []string) {
	var bufStack [512]byte
	var endsStack [64]int
	buf, ends := s.appendRequest(bufStack[:0], endsStack[:0], r)
	return split(buf, ends, len(r.Limits))
}

// split returns the keys and arguments of an encoding of appendRequest
// with nk keys, cut from one string.
func split(buf []byte, ends []int, nk int) (keys, args []string) {
	all := splitAt(string(buf), ends)
	return all[:nk:nk], all[nk:]
}

// appendRequest appends the script's keys, then its arguments, for r to
// buf, and the end offset of each to ends: the keys, "p" and the request
// packed (see batch.lua).
func (s *Store) appendRequest(buf []byte, ends []int, r *sluice.Request) ([]byte, []int) {
	now := int64(-1)
	if !r.Now.IsZero() {
		now = micros(r.Now.UnixNano())
	}
	var at int64
	if !r.At.IsZero() {
		at = micros(r.At.UnixNano())
	}
	for _, l := range r.Limits {
		buf = appendKey(buf, r.Prefix, r.Key, l.StateID())
		ends = append(ends, len(buf))
	}
	buf = append(buf, 'p')
	ends = append(ends, len(buf))
	// Every number is an integer below 2^53, exact as a double.
	num := func(v int64) {
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(float64(v)))
	}
	num(int64(r.Op))
	num(int64(r.Cost))
	num(now)
	num(at)
	num(s.slack)
	var name string // Prefix+Key, built only for staggered windows
	for _, l := range r.Limits {
		var g, b, off, adj int64
		p := ceilMicros(int64(l.Period))
		switch l.Algorithm {
		case sluice.GCRA:
			p = ceilMicros(int64(l.Interval()))
		case sluice.SlidingWindow, sluice.ApproxSlidingWindow:
			g = int64(l.BucketCount())
			b = ceilMicros((int64(l.Period) + g - 1) / g)
		case sluice.FixedWindow:
			if l.Staggered {
				if name == "" {
					name = r.Prefix + r.Key
				}
				ns := algorithm.Offset(l, name)
				off, adj = ceilMicros(ns), (1000-ns%1000)%1000
			}
		}
		num(int64(l.Algorithm))
		num(int64(l.MaxBurst()))
		num(p)
		num(g)
		num(b)
		num(off)
		num(adj)
	}
	ends = append(ends, len(buf))
	return buf, ends
}

// splitAt cuts s at the given end offsets.
func splitAt(s string, ends []int) []string {
	out := make([]string, len(ends))
	cut(out, s, ends)
	return out
}

// cut writes the pieces of s, cut at the given end offsets, to dst.
func cut(dst []string, s string, ends []int) {
	start := 0
	for i, e := range ends {
		dst[i] = s[start:e]
		start = e
	}
}

// micros is ⌊ns/1000⌋; request times are positive.
func micros(ns int64) int64 { return ns / 1000 }

// ceilMicros is ⌈ns/1000⌉ for ns ≥ 0.
func ceilMicros(ns int64) int64 { return (ns + 999) / 1000 }

// corruptPrefix starts the error reply of the script for a key holding a
// value it did not write.
const corruptPrefix = "SLUICE_CORRUPT"

// decodeReply turns the script's reply into r's Decision.
func decodeReply(r *sluice.Request, v words, err error) (sluice.Decision, error) {
	if err != nil {
		if strings.Contains(err.Error(), corruptPrefix) {
			return sluice.Decision{}, fmt.Errorf("%w: redis: %w", sluice.ErrCorruptState, err)
		}
		return sluice.Decision{}, fmt.Errorf("%w: redis: %w", sluice.ErrStore, err)
	}
	if v[0] < 0 || v[0] > 1 || v[1] < 1 || v[1] > int64(len(r.Limits)) ||
		v[2] < 0 || v[5] <= 0 || !duration(v[3], v[6]) || !duration(v[4], v[7]) {
		return sluice.Decision{}, fmt.Errorf("%w: redis: unexpected script reply %v", sluice.ErrStore, v)
	}
	d := sluice.Decision{
		Allowed:    v[0] == 1,
		Limit:      r.Limits[v[1]-1],
		Remaining:  int(v[2]),
		ResetAfter: time.Duration(v[3])*time.Microsecond - time.Duration(v[6]),
		RetryAfter: time.Duration(v[4])*time.Microsecond - time.Duration(v[7]),
		Time:       r.Now,
	}
	if r.Now.IsZero() {
		d.Time = time.UnixMicro(v[5])
	}
	return d, nil
}

// duration reports whether us µs less adj ns is a valid duration.
func duration(us, adj int64) bool {
	return us >= 0 && us <= int64(sluice.MaxPeriod/time.Microsecond)*2 && adj >= 0 && adj < 1000 && (us > 0 || adj == 0)
}

// errNoScript reports whether err is Redis's NOSCRIPT reply.
func errNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

var errReply = errors.New("unexpected script reply")
