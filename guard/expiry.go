package guard

import (
	"context"
	"sync/atomic"
	"time"
)

// DefaultMaxLapsed bounds the lapsed bans an ExpiryWatcher keeps between
// sweeps, and those whose claim it retries, when its MaxLapsed is zero.
const DefaultMaxLapsed = 10_000

// An ExpiryClaimer is a Registry shared by a fleet that elects, for each
// lapsed ban, the one process that announces its end: every replica sees
// the ban lapse, and only the first to claim it is told yes. Registries
// of one process need none. An ExpiryWatcher finds it by type assertion.
type ExpiryClaimer interface {
	// ClaimExpiry reports whether this process is the first of the fleet
	// to claim the end of b (its jail, key and Until). The error means
	// the shared store did not answer: ask again later.
	ClaimExpiry(ctx context.Context, b Ban) (bool, error)
}

// ExpiryConfig configures an ExpiryWatcher. The zero value of each field
// but Registry means its default.
type ExpiryConfig struct {
	// Registry holds the bans watched. Required.
	Registry Registry
	// OnExpire is called, on the sweeping goroutine, for each lapsed ban
	// this process claimed: keep it fast. Default none.
	OnExpire func(Ban)
	// MaxLapsed bounds the lapsed bans kept between two sweeps, and those
	// whose claim failed and is asked again at the next sweeps. Default
	// DefaultMaxLapsed.
	MaxLapsed int
}

// An ExpiryWatcher tells of the bans that lapse: each time it sweeps, it
// drops the bans of its Registry's set that lapsed, with those that any
// other caller dropped since (see BanSet.TrackLapsed), and calls
// OnExpire with each whose end this process claims. With a Registry that
// is an ExpiryClaimer (guard/redisbans, guard/memcachedbans), one process
// of the fleet claims each ban, so each lapse is told once however many
// processes watch; with any other Registry, each process tells of the
// bans of its own set. A claim the shared store failed is asked again at
// the next sweeps (up to MaxLapsed of them).
//
// A lapse is told within one sweep of the ban's end, and not at all if
// the process stops first, or if more bans lapse between two sweeps than
// MaxLapsed (Stats counts those). Create ExpiryWatchers with
// NewExpiryWatcher; one is safe for concurrent use, but one sweep runs at
// a time.
type ExpiryWatcher struct {
	c       ExpiryConfig
	claimer ExpiryClaimer
	sweep   chan struct{} // a token: one sweep at a time
	retry   []Ban         // claims to ask again

	told, others, lost, retrying atomic.Int64
}

// ExpiryStats are the counts of an ExpiryWatcher.
type ExpiryStats struct {
	// Told counts lapses this process claimed and told OnExpire.
	Told int64
	// Others counts lapses another process claimed.
	Others int64
	// Lost counts lapses never told: dropped beyond MaxLapsed, or whose
	// claim was still failing when MaxLapsed more waited.
	Lost int64
	// Retrying is how many claims wait for the shared store.
	Retrying int
}

// NewExpiryWatcher returns the watcher of c.Registry's lapsed bans. It
// makes the registry's set keep them (BanSet.TrackLapsed).
func NewExpiryWatcher(c ExpiryConfig) *ExpiryWatcher {
	if c.MaxLapsed <= 0 {
		c.MaxLapsed = DefaultMaxLapsed
	}
	w := &ExpiryWatcher{c: c, sweep: make(chan struct{}, 1)}
	w.claimer, _ = c.Registry.(ExpiryClaimer)
	c.Registry.Bans().TrackLapsed(c.MaxLapsed)
	return w
}

// Sweep drops the bans that lapsed by now and tells of those this
// process claims. It returns the watcher's counts after the sweep.
func (w *ExpiryWatcher) Sweep(ctx context.Context, now time.Time) ExpiryStats {
	w.sweep <- struct{}{}
	defer func() { <-w.sweep }()
	lapsed, lost := w.c.Registry.Bans().Lapsed(now)
	w.lost.Add(lost)
	todo := append(w.retry, lapsed...)
	w.retry = nil
	for _, b := range todo {
		switch claimed, err := w.claim(ctx, b); {
		case err != nil && len(w.retry) < w.c.MaxLapsed:
			w.retry = append(w.retry, b)
		case err != nil:
			w.lost.Add(1)
		case claimed:
			w.told.Add(1)
			if w.c.OnExpire != nil {
				w.c.OnExpire(b)
			}
		default:
			w.others.Add(1)
		}
	}
	w.retrying.Store(int64(len(w.retry)))
	return w.Stats()
}

// Stats returns the watcher's counts.
func (w *ExpiryWatcher) Stats() ExpiryStats {
	return ExpiryStats{Told: w.told.Load(), Others: w.others.Load(), Lost: w.lost.Load(), Retrying: int(w.retrying.Load())}
}

// claim asks the fleet whether this process tells of b's end.
func (w *ExpiryWatcher) claim(ctx context.Context, b Ban) (bool, error) {
	if w.claimer == nil {
		return true, nil
	}
	return w.claimer.ClaimExpiry(ctx, b)
}

// Run sweeps at every tick of every, at the time clock gives (time.Now
// when nil), until ctx is done.
func (w *ExpiryWatcher) Run(ctx context.Context, every time.Duration, clock func() time.Time) {
	if clock == nil {
		clock = time.Now
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.Sweep(ctx, clock())
		}
	}
}
