package redisbans_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/redisbans"
	"github.com/sluicehq/sluice/store/redis"
)

// A jail whose bans every process of the fleet enforces and lists: the
// registry is in Redis, beside the limiter state, on the store's own
// client. (This example needs a Redis server, so it is compiled, not
// run.)
func Example() {
	ctx := context.Background()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}, DisableCache: true})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	store, err := redis.New(redis.Config{Client: client})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	bans, err := redisbans.New(ctx, redisbans.Config{Client: client, Prefix: "myapp:bans"})
	if err != nil {
		log.Fatal(err)
	}
	defer bans.Close()
	jail, err := guard.NewJail(store, guard.JailConfig{Name: "login", MaxFailures: 3, Registry: bans})
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		if _, _, err := jail.Fail(ctx, "203.0.113.7", "failed logins"); err != nil {
			log.Fatal(err)
		}
	}
	list, err := jail.Bans(ctx) // every process's bans of this jail
	if err != nil {
		log.Fatal(err)
	}
	for _, b := range list {
		fmt.Printf("%s banned for %v: %s (offence %d)\n", b.Key, b.Until.Sub(b.Since).Round(time.Minute), b.Reason, b.Offences)
	}
	_ = jail.Lift(ctx, "203.0.113.7") // from any process: every process lifts it within milliseconds
}
