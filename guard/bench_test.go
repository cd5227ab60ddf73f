package guard_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/testing/cputime"
	"github.com/sluicehq/sluice/store/memory"
)

// BenchmarkLogin is a login's cost per attempt, on the memory store,
// over 10,000 addresses each signing in as its own user with the sample
// configuration's limits: Begin, then Succeed (kind=succeed: the
// account's known-good address recorded, its failures reset) or Fail
// (kind=fail). Its floor is the memory store's decision of one limit on
// one key (kind=floor): an attempt asks the store about four limits, the
// known-good addresses and, on a failure, the jail.
func BenchmarkLogin(b *testing.B) {
	store := memory.New(memory.Config{})
	b.Cleanup(func() { store.Close() })
	per := func(rate int, period time.Duration) sluice.Limit { return sluice.Limit{Rate: rate, Period: period} }
	l, err := guard.NewLogin(store, guard.LoginConfig{PerIPUser: per(5, 15*time.Minute), PerIP: per(50, time.Hour),
		PerUser: per(20, time.Hour), Global: per(1_000_000, time.Minute)})
	if err != nil {
		b.Fatal(err)
	}
	tries := make([]guard.Try, 10_000)
	for i := range tries {
		tries[i] = guard.Try{IP: netip.AddrFrom4([4]byte{10, 0, byte(i / 256), byte(i)}), Username: fmt.Sprintf("user%d", i)}
	}
	ctx := context.Background()
	limits := []sluice.Limit{per(50, time.Hour)}
	kinds := []struct {
		name string
		do   func(i int) error
	}{
		{"succeed", func(i int) error {
			a, err := l.Begin(ctx, tries[i])
			if err != nil {
				return err
			}
			return a.Succeed(ctx)
		}},
		{"fail", func(i int) error {
			a, err := l.Begin(ctx, tries[i])
			if err != nil {
				return err
			}
			_, _, err = a.Fail(ctx)
			return err
		}},
		{"floor", func(i int) error {
			_, err := store.Decide(ctx, sluice.Request{Prefix: "sluice:login-ip:", Key: tries[i].IP.String(), Limits: limits, Cost: 1})
			return err
		}},
	}
	for _, k := range kinds {
		b.Run("kind="+k.name, func(b *testing.B) { cputime.Loop(b, len(tries), k.do) })
	}
}
