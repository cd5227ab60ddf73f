package guard_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sluicehq/sluice/guard"
)

// A jail bans an address after three failures within ten minutes; the
// ban is exported as an nftables script for a cron job.
func Example() {
	ctx := context.Background()
	store := newExampleStore() // in an application: memory.New(memory.Config{}), or a Redis store
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	jail, err := guard.NewJail(store, guard.JailConfig{
		Name: "login", MaxFailures: 3, FindTime: 10 * time.Minute, BanTime: time.Hour, Jitter: -1,
		Clock: func() time.Time { return at },
		OnBan: func(b guard.Ban) { fmt.Printf("banned %s for %v: %s\n", b.Key, b.Until.Sub(b.Since), b.Reason) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 3 {
		if _, _, err := jail.Fail(ctx, "203.0.113.7", "failed logins"); err != nil {
			fmt.Println(err)
			return
		}
	}
	left, banned, _ := jail.Banned(ctx, "203.0.113.7")
	fmt.Println("banned:", banned, left)
	bans, _ := jail.Bans(ctx)
	_ = guard.Export(os.Stdout, guard.PF, bans, guard.ExportOptions{Now: at})
	// Output:
	// banned 203.0.113.7 for 1h0m0s: 3 failed logins within 10m0s
	// banned: true 1h0m0s
	// 203.0.113.7/32
}
