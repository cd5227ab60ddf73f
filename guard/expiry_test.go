package guard_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/store/memory"
)

// TestExpiryWatcherTellsEachLapseOnce drives a watcher on a time grid: a
// ban is told in the first sweep after its end, once; a lifted ban never;
// a ban another caller dropped (List) is told all the same.
func TestExpiryWatcherTellsEachLapseOnce(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	reg := guard.NewMemoryRegistry(guard.BanLimits{})
	var told []string
	w := guard.NewExpiryWatcher(guard.ExpiryConfig{Registry: reg, OnExpire: func(b guard.Ban) { told = append(told, b.Key) }})
	ctx := context.Background()
	for i, key := range []string{"a", "b", "lifted", "c"} {
		if _, err := reg.Put(ctx, guard.Ban{Jail: "j", Key: key, Since: t0, Until: t0.Add(time.Duration(i+1) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.Delete(ctx, "j", "lifted"); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		at   time.Duration
		list bool // another caller drops the lapsed bans first
		want []string
	}{
		{30 * time.Second, false, nil},
		{90 * time.Second, false, []string{"a"}},
		{90 * time.Second, false, nil},
		{150 * time.Second, true, []string{"b"}},
		{10 * time.Minute, false, []string{"c"}},
		{20 * time.Minute, false, nil},
	}
	for _, s := range steps {
		told = nil
		if s.list {
			reg.List(ctx, t0.Add(s.at))
		}
		w.Sweep(ctx, t0.Add(s.at))
		if !slices.Equal(told, s.want) {
			t.Errorf("Sweep(t0+%v) told %q, want %q", s.at, told, s.want)
		}
	}
	if st := w.Stats(); st.Told != 3 || st.Lost != 0 || st.Others != 0 {
		t.Errorf("Stats() = %+v, want 3 told, none lost or others'", st)
	}
}

// TestExpiryWatcherBounded: more lapses between two sweeps than
// MaxLapsed are counted lost, not kept.
func TestExpiryWatcherBounded(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	reg := guard.NewMemoryRegistry(guard.BanLimits{})
	n := 0
	w := guard.NewExpiryWatcher(guard.ExpiryConfig{Registry: reg, MaxLapsed: 3, OnExpire: func(guard.Ban) { n++ }})
	for i := range 10 {
		if _, err := reg.Put(context.Background(), guard.Ban{Jail: "j", Key: string(rune('a' + i)), Since: t0, Until: t0.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	reg.List(context.Background(), t0.Add(2*time.Minute)) // drops all 10; 3 are kept
	st := w.Sweep(context.Background(), t0.Add(2*time.Minute))
	if n != 3 || st.Told != 3 || st.Lost != 7 {
		t.Errorf("told %d, Stats %+v; want 3 told and 7 lost", n, st)
	}
}

// failingClaimer is a Registry whose claims fail until ok is set.
type failingClaimer struct {
	*guard.MemoryRegistry
	ok bool
}

func (f *failingClaimer) ClaimExpiry(context.Context, guard.Ban) (bool, error) {
	if !f.ok {
		return false, errors.New("store down")
	}
	return true, nil
}

// TestExpiryWatcherRetriesClaims: a claim the store failed is asked
// again at the next sweep, and told then.
func TestExpiryWatcherRetriesClaims(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	reg := &failingClaimer{MemoryRegistry: guard.NewMemoryRegistry(guard.BanLimits{})}
	var told []string
	w := guard.NewExpiryWatcher(guard.ExpiryConfig{Registry: reg, OnExpire: func(b guard.Ban) { told = append(told, b.Key) }})
	if _, err := reg.Put(context.Background(), guard.Ban{Jail: "j", Key: "k", Since: t0, Until: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if st := w.Sweep(context.Background(), t0.Add(2*time.Minute)); len(told) != 0 || st.Retrying != 1 {
		t.Fatalf("with the store down: told %q, Stats %+v; want none told, 1 retrying", told, st)
	}
	reg.ok = true
	if st := w.Sweep(context.Background(), t0.Add(3*time.Minute)); !slices.Equal(told, []string{"k"}) || st.Retrying != 0 {
		t.Errorf("with the store back: told %q, Stats %+v; want [k], none retrying", told, st)
	}
}

// TestJailOnLift: Lift tells OnLift of the ban it ended, and nothing
// when there was none.
func TestJailOnLift(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	store := memory.New(memory.Config{})
	defer store.Close()
	var lifted []guard.Ban
	j, err := guard.NewJail(store, guard.JailConfig{Name: "login", Clock: func() time.Time { return t0 },
		OnLift: func(b guard.Ban) { lifted = append(lifted, b) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, err := j.Ban(ctx, "203.0.113.7", time.Hour, "by hand")
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Lift(ctx, "203.0.113.7"); err != nil {
		t.Fatal(err)
	}
	if err := j.Lift(ctx, "203.0.113.7"); !errors.Is(err, guard.ErrNotBanned) {
		t.Errorf("second Lift = %v, want ErrNotBanned", err)
	}
	if len(lifted) != 1 || lifted[0] != b {
		t.Errorf("OnLift got %+v, want once %+v", lifted, b)
	}
}
