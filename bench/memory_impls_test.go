package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	sethvargo "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/sluicehq/sluice"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ululememory "github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"
)

// memLimit is one limit in terms every implementation understands: Rate
// events per Period, at most Burst at once. The fixed-window peers
// (sethvargo/go-limiter, ulule/limiter) have no burst: they admit Rate per
// window.
type memLimit struct {
	Rate   int
	Period time.Duration
	Burst  int
}

func (l memLimit) String() string { return fmt.Sprintf("%d/%v burst %d", l.Rate, l.Period, l.Burst) }

// memTaker is one implementation configured with one limit: a keyed rate
// limiter taking one event at a time.
type memTaker interface {
	// take asks for one event for key: allowed, or an error when the
	// implementation could not decide.
	take(ctx context.Context, key string) (bool, error)
	// close releases the limiter's goroutines and memory.
	close()
}

// memImpl is one in-memory implementation under test.
type memImpl struct {
	// name is the impl= element of benchmark names; sluice's start with
	// "sluice".
	name string
	// clock says which clock the implementation reads when it is given
	// none, for the report.
	clock string
	// injectable reports whether the implementation can be given the time
	// of each request, so traces on a fake clock can drive it.
	injectable bool
	// model names the semantics, to pick the reference count in
	// TestAdmitted: "gcra" or a sluice algorithm name, or "fixed-first"
	// for a fixed window that opens at a key's first request.
	model string
	// new builds a limiter applying l. When now is not nil and the
	// implementation is injectable, it reads each request's time from now.
	new func(l memLimit, now func() time.Time) (memTaker, error)
	// fits reports why the implementation cannot run l ("" if it can):
	// a limit out of its range, or state too large for 1M keys.
	fits func(l memLimit, keys int) string
}

// memImpls lists the implementations, sluice's first.
var memImpls = []memImpl{
	sluiceImpl(sluice.GCRA),
	sluiceAdmitImpl(),
	sluiceImpl(sluice.FixedWindow),
	sluiceImpl(sluice.SlidingWindow),
	sluiceImpl(sluice.ApproxSlidingWindow),
	sluiceImpl(sluice.SlidingLog),
	{
		name:       "x-time-rate",
		clock:      "time.Now per call (Limiter.Allow)",
		injectable: true,
		model:      "gcra",
		new:        newXRateMutex,
	},
	{
		name:       "x-time-rate-syncmap",
		clock:      "time.Now per call (Limiter.Allow)",
		injectable: true,
		model:      "gcra",
		new:        newXRateSyncMap,
	},
	{
		name:  "sethvargo",
		clock: "its fasttime: time.now linked in, wall clock, per call",
		model: "fixed-first",
		new:   newSethvargo,
	},
	{
		name:  "ulule",
		clock: "time.Now three times per call",
		model: "fixed-first",
		new:   newUlule,
	},
	{
		name:       "throttled",
		clock:      "time.Now per call (MemStore.SetTimeNow can replace it)",
		injectable: true,
		model:      "gcra",
		new:        newThrottled,
	},
	floorGCRAImpl,
}

// xrateLimit converts l to x/time/rate's events per second.
func xrateLimit(l memLimit) rate.Limit { return rate.Limit(float64(l.Rate) / l.Period.Seconds()) }

// xrateMutex is how x/time/rate is used per key: one *rate.Limiter per
// key in a map behind a mutex.
type xrateMutex struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	limit rate.Limit
	burst int
	now   func() time.Time
}

func newXRateMutex(l memLimit, now func() time.Time) (memTaker, error) {
	return &xrateMutex{m: make(map[string]*rate.Limiter), limit: xrateLimit(l), burst: l.Burst, now: now}, nil
}

func (x *xrateMutex) take(_ context.Context, key string) (bool, error) {
	x.mu.Lock()
	lim, ok := x.m[key]
	if !ok {
		lim = rate.NewLimiter(x.limit, x.burst)
		x.m[key] = lim
	}
	x.mu.Unlock()
	if x.now != nil {
		return lim.AllowN(x.now(), 1), nil
	}
	return lim.Allow(), nil
}

func (x *xrateMutex) close() {}

// xrateSyncMap keeps the limiters in a sync.Map instead, the other common
// way; it is slower and bigger at 1M keys.
type xrateSyncMap struct {
	m     sync.Map
	limit rate.Limit
	burst int
	now   func() time.Time
}

func newXRateSyncMap(l memLimit, now func() time.Time) (memTaker, error) {
	return &xrateSyncMap{limit: xrateLimit(l), burst: l.Burst, now: now}, nil
}

func (x *xrateSyncMap) take(_ context.Context, key string) (bool, error) {
	v, ok := x.m.Load(key)
	if !ok {
		v, _ = x.m.LoadOrStore(key, rate.NewLimiter(x.limit, x.burst))
	}
	lim := v.(*rate.Limiter)
	if x.now != nil {
		return lim.AllowN(x.now(), 1), nil
	}
	return lim.Allow(), nil
}

func (x *xrateSyncMap) close() {}

// sethvargoTaker is sethvargo/go-limiter's memorystore: Rate tokens per
// Period, refilled once per elapsed Period since the key's first request.
type sethvargoTaker struct{ store sethvargo.Store }

func newSethvargo(l memLimit, _ func() time.Time) (memTaker, error) {
	st, err := memorystore.New(&memorystore.Config{Tokens: uint64(l.Rate), Interval: l.Period})
	if err != nil {
		return nil, err
	}
	return sethvargoTaker{st}, nil
}

func (s sethvargoTaker) take(ctx context.Context, key string) (bool, error) {
	_, _, _, ok, err := s.store.Take(ctx, key)
	return ok, err
}

func (s sethvargoTaker) close() { _ = s.store.Close(context.Background()) }

// ululeTaker is ulule/limiter with its memory store: a counter per key in
// a sync.Map, expiring Period after the key's first request.
type ululeTaker struct{ lim *ulule.Limiter }

func newUlule(l memLimit, _ func() time.Time) (memTaker, error) {
	// No cleaner goroutine (its default runs every 30 s, longer than a
	// benchmark keeps a store): it would keep a finished benchmark's 1M
	// counters alive until a finalizer stops it.
	st := ululememory.NewStoreWithOptions(ulule.StoreOptions{Prefix: ulule.DefaultPrefix})
	return ululeTaker{ulule.New(st, ulule.Rate{Period: l.Period, Limit: int64(l.Rate)})}, nil
}

func (u ululeTaker) take(ctx context.Context, key string) (bool, error) {
	c, err := u.lim.Get(ctx, key)
	return err == nil && !c.Reached, err
}

func (u ululeTaker) close() {}

// throttledTaker is throttled's GCRA over its memstore (unbounded map,
// compare-and-swap per update, up to 10 attempts).
type throttledTaker struct{ lim *throttled.GCRARateLimiterCtx }

func newThrottled(l memLimit, now func() time.Time) (memTaker, error) {
	st, err := memstore.New(0)
	if err != nil {
		return nil, err
	}
	if now != nil {
		st.SetTimeNow(now)
	}
	// throttled admits MaxBurst+1 at once.
	lim, err := throttled.NewGCRARateLimiterCtx(throttled.WrapStoreWithContext(st),
		throttled.RateQuota{MaxRate: throttled.PerDuration(l.Rate, l.Period), MaxBurst: l.Burst - 1})
	if err != nil {
		return nil, err
	}
	return throttledTaker{lim}, nil
}

func (t throttledTaker) take(ctx context.Context, key string) (bool, error) {
	limited, _, err := t.lim.RateLimitCtx(ctx, key, 1)
	return err == nil && !limited, err
}

func (t throttledTaker) close() {}
