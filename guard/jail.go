package guard

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// Bounds of a Jail.
const (
	// MaxOffences is the most offences a Jail remembers per actor: fewer
	// when its bans stop growing sooner (see JailConfig.Growth).
	MaxOffences = 64
)

// A StrikeLoss tells why a failure a Jail was told of went uncounted, or
// was counted without the failures before it.
type StrikeLoss uint8

const (
	// StrikeEstimated: the denial it reports was an estimate of a store at
	// its memory cap (sluice.Decision.Estimated), of an actor that may
	// have spent nothing: the failure is not counted.
	StrikeEstimated StrikeLoss = iota + 1
	// StrikeForgotten: the jail's store had forgotten the actor's
	// earlier failures (sluice.Decision.Forgotten): the failure counted
	// as its first.
	StrikeForgotten
	// StrikeFailed: the jail's store failed: the failure is not counted.
	StrikeFailed
)

var lossNames = [...]string{StrikeEstimated: "estimated", StrikeForgotten: "forgotten", StrikeFailed: "store-error"}

// String returns how metrics name the loss: "estimated", "forgotten" or
// "store-error".
func (l StrikeLoss) String() string {
	if int(l) < len(lossNames) && lossNames[l] != "" {
		return lossNames[l]
	}
	return "StrikeLoss(" + strconv.Itoa(int(l)) + ")"
}

// JailConfig configures a Jail. The zero value of each field means its
// default.
type JailConfig struct {
	// Name identifies the jail in its store keys, bans and logs. Default
	// "jail".
	Name string
	// MaxFailures failures within FindTime earn a ban. Default 5.
	MaxFailures int
	// FindTime is the window failures are counted in, exactly (a sliding
	// log). Default 10 minutes.
	FindTime time.Duration
	// BanTime is the length of a first ban. Default 10 minutes.
	BanTime time.Duration
	// Growth multiplies the ban's length for each earlier offence still
	// remembered: BanTime·Growth^(offences-1). Default 2; 1 keeps bans
	// constant.
	Growth float64
	// MaxBanTime caps a ban's length. Default 7 days.
	MaxBanTime time.Duration
	// Jitter lengthens each ban by a random fraction up to Jitter of it, so
	// that a botnet's bans do not all lapse at once. Default 0.1; negative
	// means none.
	Jitter float64
	// OffenceMemory is how long a ban counts as an earlier offence.
	// Default 7 days.
	OffenceMemory time.Duration
	// Registry keeps the bans, which are enforced from it: share one
	// between processes (packages guard/redisbans, guard/memcachedbans)
	// for fleet-wide bans.
	// Default a new MemoryRegistry of this jail alone.
	Registry Registry
	// OnBan, if set, is called after each ban, by Fail or by Ban, to tell
	// an admin, also when the Registry's shared store failed but the
	// process enforces the ban. It runs on the caller's goroutine: keep
	// it fast.
	OnBan func(Ban)
	// OnLost, if set, is called with the jail's name for each failure it
	// was told of that went uncounted, or counted without those before it
	// (see StrikeLoss), so that an operator sees strikes a store at its
	// cap lost. It runs on the caller's goroutine: keep it fast.
	OnLost func(jail string, why StrikeLoss)
	// OnLift, if set, is called after Lift (and Pardon) ends a ban, with
	// the ban as this process held it (only Jail and Key when it held
	// none). It runs on the caller's goroutine: keep it fast. Lapsed bans
	// are told by an ExpiryWatcher.
	OnLift func(Ban)
	// Namespace prefixes the jail's store keys. Default "sluice".
	Namespace string
	// Clock returns the time of bans and of decisions. Default nil:
	// decisions use the store's clock, bans time.Now.
	Clock func() time.Time
}

// A Jail bans actors that fail too often: fail2ban for applications.
// MaxFailures failures within FindTime ban the actor for BanTime, longer
// for each earlier ban within OffenceMemory, with jitter. Failures and
// offences live in the sluice Store, so every process sharing it counts
// the same failures; bans live in the Registry, never in the Store, so
// that no eviction of rate states can lift one, and every process
// sharing the Registry enforces the same bans.
//
// Create Jails with NewJail. A Jail is safe for concurrent use.
type Jail struct {
	c        JailConfig
	failures *sluice.Limiter
	offences *sluice.Limiter
}

// NewJail returns a Jail keeping its state in store.
func NewJail(store sluice.Store, c JailConfig) (*Jail, error) {
	if c.Name == "" {
		c.Name = "jail"
	}
	if c.MaxFailures <= 0 {
		c.MaxFailures = 5
	}
	if c.FindTime <= 0 {
		c.FindTime = 10 * time.Minute
	}
	if c.BanTime <= 0 {
		c.BanTime = 10 * time.Minute
	}
	if c.Growth <= 0 {
		c.Growth = 2
	}
	if c.MaxBanTime <= 0 {
		c.MaxBanTime = 7 * 24 * time.Hour
	}
	if c.Jitter == 0 {
		c.Jitter = 0.1
	}
	if c.OffenceMemory <= 0 {
		c.OffenceMemory = 7 * 24 * time.Hour
	}
	if c.Registry == nil {
		c.Registry = &MemoryRegistry{}
	}
	if c.Growth < 1 || c.MaxBanTime < c.BanTime || c.MaxBanTime > sluice.MaxPeriod/2 || c.Jitter > 1 {
		return nil, fmt.Errorf("%w: guard: jail %q: growth %v must be ≥ 1, jitter %v ≤ 1, and ban times %v ≤ %v ≤ %v", sluice.ErrInvalidRequest, c.Name, c.Growth, c.Jitter, c.BanTime, c.MaxBanTime, sluice.MaxPeriod/2)
	}
	j := &Jail{c: c}
	var err error
	// Both counts lead to bans, which the actor's own limits back up: safe
	// to forget, never charged from the counts of other actors that a
	// store at its cap forgot (an innocent must not be banned for them).
	if j.failures, err = sluice.New(store, sluice.Config{Limits: []sluice.Limit{{Rate: c.MaxFailures, Period: c.FindTime, Algorithm: sluice.SlidingLog}},
		Action: "jail-failures:" + c.Name, Namespace: c.Namespace, Clock: c.Clock, SafeToForget: true}); err != nil {
		return nil, err
	}
	if j.offences, err = sluice.New(store, sluice.Config{Limits: []sluice.Limit{{Rate: offencesKept(c), Period: c.OffenceMemory, Algorithm: sluice.SlidingLog}},
		Action: "jail-offences:" + c.Name, Namespace: c.Namespace, Clock: c.Clock, SafeToForget: true}); err != nil {
		return nil, err
	}
	return j, nil
}

// offencesKept returns how many offences a jail of c counts per actor:
// up to the one whose ban is the longest (MaxBanTime), past which more
// change nothing, and at least 8, at most MaxOffences. (A log of 64
// took 520 bytes of the store per banned actor: a ban flood's weight.)
func offencesKept(c JailConfig) int {
	n := 1
	for d := float64(c.BanTime); d < float64(c.MaxBanTime) && n < MaxOffences; n++ {
		d *= c.Growth
	}
	return min(max(n, 8), MaxOffences)
}

// Name returns the jail's name.
func (j *Jail) Name() string { return j.c.Name }

// Config returns the jail's configuration, its defaults filled in.
func (j *Jail) Config() JailConfig { return j.c }

func (j *Jail) now() time.Time {
	if j.c.Clock != nil {
		return j.c.Clock()
	}
	return time.Now()
}

// Fail records a failure of key (an address, a username) and bans it if it
// has now failed MaxFailures times within FindTime. It returns the ban
// when it made one. A key already banned is not banned again.
func (j *Jail) Fail(ctx context.Context, key, reason string) (Ban, bool, error) {
	d, err := j.failures.Allow(ctx, key)
	if err != nil {
		j.Lost(StrikeFailed)
		return Ban{}, false, fmt.Errorf("guard: jail %s: %w", j.c.Name, err)
	}
	if d.Forgotten {
		j.Lost(StrikeForgotten)
	}
	if d.Allowed && d.Remaining > 0 {
		return Ban{}, false, nil
	}
	if _, banned := j.c.Registry.Bans().Match(j.c.Name, key, j.now()); banned {
		return Ban{}, false, nil
	}
	if reason == "" {
		reason = "failures"
	}
	b, err := j.ban(ctx, key, 0, fmt.Sprintf("%d %s within %v", j.c.MaxFailures, reason, j.c.FindTime))
	if err != nil {
		return Ban{}, false, err
	}
	return b, true, nil
}

// Lost tells the jail's OnLost that a failure went uncounted, or was
// counted without those before it, for why.
func (j *Jail) Lost(why StrikeLoss) {
	if j.c.OnLost != nil {
		j.c.OnLost(j.c.Name, why)
	}
}

// Ban bans key by hand for d (zero: the length Fail would choose),
// counting it as an offence. A key that is an address or a network bans
// every address in it. It returns the ban as the Registry recorded it
// (see BanSet.Put).
func (j *Jail) Ban(ctx context.Context, key string, d time.Duration, reason string) (Ban, error) {
	return j.ban(ctx, key, d, reason)
}

func (j *Jail) ban(ctx context.Context, key string, d time.Duration, reason string) (Ban, error) {
	od, err := j.offences.Allow(ctx, key)
	if err != nil {
		return Ban{}, fmt.Errorf("guard: jail %s: %w", j.c.Name, err)
	}
	n := od.Limit.Rate // as many as it counts: the longest ban
	if od.Allowed {
		n -= od.Remaining
	}
	if d <= 0 {
		d = j.length(n)
	}
	if err := j.failures.Reset(ctx, key); err != nil {
		return Ban{}, fmt.Errorf("guard: jail %s: %w", j.c.Name, err)
	}
	now := j.now()
	b, err := j.c.Registry.Put(ctx, Ban{Jail: j.c.Name, Key: key, Reason: reason, Since: now, Until: now.Add(d.Round(flagResolution)), Offences: n})
	if err != nil {
		if held, ok := j.c.Registry.Bans().Get(j.c.Name, b.Key); ok && held == b && j.c.OnBan != nil {
			j.c.OnBan(b) // enforced here, though the shared store failed: it is a ban all the same
		}
		return b, fmt.Errorf("guard: jail %s: %w", j.c.Name, err)
	}
	if j.c.OnBan != nil {
		j.c.OnBan(b)
	}
	return b, nil
}

// length returns the length of a ban for the nth offence, jittered.
func (j *Jail) length(n int) time.Duration {
	d := float64(j.c.BanTime)
	for i := 1; i < n && d < float64(j.c.MaxBanTime); i++ {
		d *= j.c.Growth
	}
	d = min(d, float64(j.c.MaxBanTime))
	if j.c.Jitter > 0 {
		d += d * j.c.Jitter * rand.Float64()
	}
	return time.Duration(d)
}

// Banned reports whether key is banned (by a ban of key, or of a network
// that contains it when key is an address or a network), and for how
// much longer. It asks the Registry's set in memory, which cannot fail:
// the error is always nil.
func (j *Jail) Banned(_ context.Context, key string) (time.Duration, bool, error) {
	now := j.now()
	b, banned := j.c.Registry.Bans().Match(j.c.Name, key, now)
	if !banned {
		return 0, false, nil
	}
	return b.Until.Sub(now), true, nil
}

// Registry returns the registry of the jail's bans.
func (j *Jail) Registry() Registry { return j.c.Registry }

// Lift ends key's ban and forgets its failures; its earlier offences still
// count if it offends again. The error wraps ErrNotBanned when key had no
// ban in the jail (its failures are forgotten all the same).
func (j *Jail) Lift(ctx context.Context, key string) error {
	if err := j.failures.Reset(ctx, key); err != nil {
		return fmt.Errorf("guard: jail %s: %w", j.c.Name, err)
	}
	old, held := j.c.Registry.Bans().Get(j.c.Name, key)
	if err := j.c.Registry.Delete(ctx, j.c.Name, key); err != nil {
		return fmt.Errorf("guard: jail %s: %w", j.c.Name, err)
	}
	if j.c.OnLift != nil {
		if !held {
			old = Ban{Jail: j.c.Name, Key: BanKey(key)}
		}
		j.c.OnLift(old)
	}
	return nil
}

// Pardon lifts key's ban, if any, and forgets its failures and offences.
func (j *Jail) Pardon(ctx context.Context, key string) error {
	if err := j.Lift(ctx, key); err != nil && !errors.Is(err, ErrNotBanned) {
		return err
	}
	return j.offences.Reset(ctx, key)
}

// Bans lists the jail's bans in force, from its Registry.
func (j *Jail) Bans(ctx context.Context) ([]Ban, error) {
	all, err := j.c.Registry.List(ctx, j.now())
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, b := range all {
		if b.Jail == j.c.Name {
			out = append(out, b)
		}
	}
	return out, nil
}
