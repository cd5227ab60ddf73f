package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// RunQuotas runs the conformance suite of sluice.QuotaStore against the
// stores newStore returns, called once per subtest as Run's is. Times are
// whole microseconds, as the Redis store keeps them; each subtest uses a
// prefix of its own.
func RunQuotas(t *testing.T, newStore func(t *testing.T) sluice.QuotaStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, qs *quotaSuite)
	}{
		{"Fair", testQuotaFair},
		{"Expiry", testQuotaExpiry},
		{"Release", testQuotaRelease},
		{"Keep", testQuotaKeep},
		{"Reserve", testQuotaReserve},
		{"Keys", testQuotaKeys},
		{"Full", testQuotaFull},
		{"Invalid", testQuotaInvalid},
		{"Differential", testQuotaDifferential},
		{"Concurrency", testQuotaConcurrency},
		{"StoreClock", testQuotaStoreClock},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			if s == nil {
				t.Fatal("newStore returned nil")
			}
			tt.fn(t, &quotaSuite{store: s, prefix: newPrefix(t)})
		})
	}
}

type quotaSuite struct {
	store  sluice.QuotaStore
	prefix string
}

// quotaLimit is the limit the suite divides: 1,000 a second.
var quotaLimit = sluice.PerSecond(1000)

// shareOp is one call of a trace: holder asks for demand of key's limit
// at t0+at, with a TTL, or releases its share.
type shareOp struct {
	key, holder string
	demand      int
	reserve     int
	at, ttl     time.Duration
	release     bool
}

func (o shareOp) String() string {
	if o.release {
		return fmt.Sprintf("release(key %q, holder %q, at %v)", o.key, o.holder, o.at)
	}
	return fmt.Sprintf("share(key %q, holder %q, demand %d, at %v, ttl %v)", o.key, o.holder, o.demand, o.at, o.ttl)
}

func (qs *quotaSuite) call(t *testing.T, o shareOp) (sluice.Share, error) {
	t.Helper()
	if o.ttl == 0 {
		o.ttl = 3 * time.Second
	}
	return qs.store.Share(t.Context(), sluice.ShareRequest{
		Prefix: qs.prefix, Key: o.key, Holder: o.holder, Limit: quotaLimit,
		Demand: o.demand, Reserve: o.reserve, TTL: o.ttl, Release: o.release, Now: t0.Add(o.at),
	})
}

// want runs o and fails t unless the share is rate, among holders.
func (qs *quotaSuite) want(t *testing.T, o shareOp, rate, holders int) sluice.Share {
	t.Helper()
	s, err := qs.call(t, o)
	if err != nil {
		t.Fatalf("%v error: %v", o, err)
	}
	if s.Rate != rate || s.Holders != holders {
		t.Fatalf("%v = rate %d, holders %d; want %d, %d", o, s.Rate, s.Holders, rate, holders)
	}
	if s.Granted > quotaLimit.Rate || s.Limit != quotaLimit || !s.Time.Equal(t0.Add(o.at)) {
		t.Errorf("%v = %+v: want Granted at most %d, the request's Limit and Time", o, s, quotaLimit.Rate)
	}
	return s
}

func share(key, holder string, demand int, at time.Duration) shareOp {
	return shareOp{key: key, holder: holder, demand: demand, at: at}
}

// testQuotaFair: holders of demands 1:2:…:8 asking in turn reach their
// max-min fair shares of 1,000 within their third round, and the
// answers count the table.
func testQuotaFair(t *testing.T, qs *quotaSuite) {
	demands := []int{50, 100, 150, 200, 250, 300, 350, 400}
	var last [8]sluice.Share
	for round := range 3 {
		for i, d := range demands {
			s, err := qs.call(t, share("k", fmt.Sprint("h", i), d, time.Duration(round)*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			last[i] = s
		}
	}
	fair := []int{50, 100, 141, 141, 141, 141, 141, 141}
	for i, s := range last {
		if diff := s.Rate - fair[i]; diff*algorithm.Hysteresis > fair[i] || -diff*algorithm.Hysteresis > fair[i] {
			t.Errorf("holder %d (demand %d): share %d, want %d within 1/%d", i, demands[i], s.Rate, fair[i], algorithm.Hysteresis)
		}
	}
	if s := last[7]; s.Holders != 8 || s.Demand != 1800 || s.Granted > 1000 || s.Granted < 900 {
		t.Errorf("last answer %+v: want 8 holders, demand 1800, granted 900 to 1000", s)
	}
	if want := t0.Add(2*time.Second + 3*time.Second); !last[0].Expires.Equal(want) {
		t.Errorf("Expires = %v, want %v", last[0].Expires, want)
	}
}

// testQuotaExpiry: a share counts until its expiry and not at it: a
// holder that stops asking gives its share back within one TTL.
func testQuotaExpiry(t *testing.T, qs *quotaSuite) {
	qs.want(t, share("k", "a", sluice.UnknownDemand, 0), 1000, 1)
	qs.want(t, share("k", "b", 500, time.Second), 0, 2)
	qs.want(t, share("k", "b", 500, 3*time.Second-time.Microsecond), 0, 2)
	qs.want(t, share("k", "b", 500, 3*time.Second), 500, 1) // a's share expired at 3s
}

// testQuotaRelease: a release frees the share at once; releasing again
// changes nothing.
func testQuotaRelease(t *testing.T, qs *quotaSuite) {
	qs.want(t, share("k", "a", sluice.UnknownDemand, 0), 1000, 1)
	rel := shareOp{key: "k", holder: "a", at: time.Second, release: true}
	qs.want(t, rel, 0, 0)
	qs.want(t, rel, 0, 0)
	qs.want(t, share("k", "b", 600, time.Second), 600, 1)
}

// testQuotaKeep: KeepDemand keeps the demand the table holds for a
// holder (a reconnecting edge keeps its share), and counts as
// UnknownDemand for a newcomer.
func testQuotaKeep(t *testing.T, qs *quotaSuite) {
	qs.want(t, share("k", "a", 300, 0), 300, 1)
	qs.want(t, share("k", "b", 500, time.Millisecond), 500, 2)
	qs.want(t, share("k", "a", sluice.KeepDemand, 2*time.Millisecond), 300, 2)
	qs.want(t, share("k", "c", sluice.KeepDemand, 3*time.Millisecond), 200, 3) // unknown: what is free
	qs.want(t, share("k", "a", 300, 4*time.Millisecond), 300, 3)
}

// testQuotaReserve: with a reserve, a newcomer gets half of what is free
// while the others hold all they may (the reserve), the next half of the
// rest; the others shrink to the level of the limit less the reserve as
// they ask again.
func testQuotaReserve(t *testing.T, qs *quotaSuite) {
	r := func(holder string, demand int, at time.Duration) shareOp {
		return shareOp{key: "k", holder: holder, demand: demand, reserve: 50, at: at}
	}
	qs.want(t, r("a", sluice.UnknownDemand, 0), 950, 1)
	qs.want(t, r("b", sluice.UnknownDemand, time.Millisecond), 25, 2)
	qs.want(t, r("c", sluice.UnknownDemand, 2*time.Millisecond), 13, 3)
	qs.want(t, r("a", 2000, time.Second), 316, 3)
	if s := qs.want(t, r("b", 400, time.Second), 316, 3); s.Granted != 645 {
		t.Errorf("granted %d after b, want 645", s.Granted)
	}
}

// testQuotaKeys: keys, prefixes and periods have tables of their own.
func testQuotaKeys(t *testing.T, qs *quotaSuite) {
	qs.want(t, share("k1", "a", sluice.UnknownDemand, 0), 1000, 1)
	qs.want(t, share("k2", "a", sluice.UnknownDemand, 0), 1000, 1)
	s, err := qs.store.Share(t.Context(), sluice.ShareRequest{Prefix: qs.prefix, Key: "k1", Holder: "b",
		Limit: sluice.PerMinute(60), Demand: sluice.UnknownDemand, TTL: time.Second, Now: t0})
	if err != nil || s.Rate != 60 || s.Holders != 1 {
		t.Errorf("another period on k1 = %+v, %v; want a table of its own, rate 60", s, err)
	}
	s, err = qs.store.Share(t.Context(), sluice.ShareRequest{Prefix: qs.prefix + "x:", Key: "k1", Holder: "b",
		Limit: quotaLimit, Demand: sluice.UnknownDemand, TTL: time.Second, Now: t0})
	if err != nil || s.Rate != 1000 || s.Holders != 1 {
		t.Errorf("another prefix = %+v, %v; want a table of its own", s, err)
	}
}

// testQuotaFull: a table of MaxQuotaHolders refuses a newcomer, Full,
// and keeps every holder's share.
func testQuotaFull(t *testing.T, qs *quotaSuite) {
	for i := range sluice.MaxQuotaHolders {
		if _, err := qs.call(t, share("k", fmt.Sprint("h", i), 0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := qs.call(t, share("k", "late", sluice.UnknownDemand, time.Millisecond))
	if err != nil || !s.Full || s.Rate != 0 || s.Holders != sluice.MaxQuotaHolders {
		t.Fatalf("newcomer to a full table = %+v, %v; want Full, rate 0", s, err)
	}
	qs.want(t, share("k", "h0", 10, time.Millisecond), 10, sluice.MaxQuotaHolders)
}

// testQuotaInvalid: malformed requests are errors wrapping
// ErrInvalidRequest.
func testQuotaInvalid(t *testing.T, qs *quotaSuite) {
	good := sluice.ShareRequest{Prefix: qs.prefix, Key: "k", Holder: "a", Limit: quotaLimit, TTL: time.Second, Now: t0}
	for name, edit := range map[string]func(r *sluice.ShareRequest){
		"no holder":         func(r *sluice.ShareRequest) { r.Holder = "" },
		"long holder":       func(r *sluice.ShareRequest) { r.Holder = strings.Repeat("h", sluice.MaxHolderLen+1) },
		"rate 0":            func(r *sluice.ShareRequest) { r.Limit.Rate = 0 },
		"huge rate":         func(r *sluice.ShareRequest) { r.Limit.Rate = sluice.MaxQuotaRate + 1 },
		"no period":         func(r *sluice.ShareRequest) { r.Limit.Period = 0 },
		"negative demand":   func(r *sluice.ShareRequest) { r.Demand = -3 },
		"negative reserve":  func(r *sluice.ShareRequest) { r.Reserve = -1 },
		"reserve over half": func(r *sluice.ShareRequest) { r.Reserve = quotaLimit.Rate/2 + 1 },
		"no ttl":            func(r *sluice.ShareRequest) { r.TTL = 0 },
		"long ttl":          func(r *sluice.ShareRequest) { r.TTL = sluice.MaxLeaseTTL + 1 },
		"before 1970":       func(r *sluice.ShareRequest) { r.Now = time.Unix(-5, 0) },
	} {
		r := good
		edit(&r)
		if _, err := qs.store.Share(t.Context(), r); !errors.Is(err, sluice.ErrInvalidRequest) {
			t.Errorf("%s: error %v, want ErrInvalidRequest", name, err)
		}
	}
}

// testQuotaDifferential plays random traces on the store and on
// algorithm.QuotaTable: every share the same. The first ten draw any
// demands; the next ten, steady ones (each holder near a demand of its
// own, under a reserve), so that shares sit within the hysteresis of
// the level and the reserve's slack (algorithm.QuotaTable) comes into
// play.
func testQuotaDifferential(t *testing.T, qs *quotaSuite) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trace := range 20 {
		key := fmt.Sprint("trace", trace)
		var ref algorithm.QuotaTable
		at := time.Duration(0)
		steady := trace >= 10
		for step := range 60 {
			at += time.Duration(rng.Int64N(400_000)) * time.Microsecond
			o := shareOp{key: key, holder: fmt.Sprint("h", rng.IntN(6)), at: at, reserve: rng.IntN(3) * rng.IntN(200),
				demand: rng.IntN(1202) - 2, ttl: time.Duration(1+rng.IntN(2000)) * time.Millisecond, release: rng.IntN(10) == 0}
			if steady {
				h := rng.IntN(8)
				o.holder, o.reserve, o.ttl, o.release = fmt.Sprint("h", h), 50, 2*time.Second, false
				o.demand = []int{46, 100, 140, 140, 140, 140, 140, 140}[h] + rng.IntN(7) - 3
			}
			s, err := qs.call(t, o)
			if err != nil {
				t.Fatalf("trace %d step %d: %v: %v", trace, step, o, err)
			}
			now := t0.Add(o.at).UnixNano()
			var want int64
			if o.release {
				ref.Release(o.holder, now)
			} else {
				want, _ = ref.Share(o.holder, int64(o.demand), int64(quotaLimit.Rate), int64(o.reserve), now, now+int64(o.ttl), sluice.MaxQuotaHolders)
			}
			if int64(s.Rate) != want || s.Holders != len(ref.Holders) || int64(s.Granted) != ref.Granted() {
				t.Fatalf("trace %d step %d: %v = %+v; the algorithm: rate %d, holders %d, granted %d", trace, step, o, s, want, len(ref.Holders), ref.Granted())
			}
		}
	}
}

// testQuotaConcurrency: holders asking at once from many goroutines
// never see shares summing past the limit.
func testQuotaConcurrency(t *testing.T, qs *quotaSuite) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for i := range 50 {
				s, err := qs.call(t, share("k", fmt.Sprint("h", g), rng.IntN(400), time.Duration(i)*time.Millisecond))
				if err == nil && s.Granted > quotaLimit.Rate {
					err = fmt.Errorf("granted %d > %d", s.Granted, quotaLimit.Rate)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// testQuotaStoreClock: a request without Now is decided at the store's
// clock: its share expires one TTL after the answer's Time.
func testQuotaStoreClock(t *testing.T, qs *quotaSuite) {
	s, err := qs.store.Share(t.Context(), sluice.ShareRequest{Prefix: qs.prefix, Key: "k", Holder: "a",
		Limit: quotaLimit, Demand: 100, TTL: 5 * time.Second})
	if err != nil || s.Rate != 100 {
		t.Fatalf("Share at the store's clock = %+v, %v", s, err)
	}
	if d := s.Expires.Sub(s.Time); d != 5*time.Second || time.Since(s.Time).Abs() > time.Minute {
		t.Errorf("Expires - Time = %v, Time %v: want 5s, and now", d, s.Time)
	}
}
