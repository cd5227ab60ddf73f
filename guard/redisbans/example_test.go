package redisbans_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/redisbans"
	"github.com/sluicehq/sluice/store/memory"
)

// A jail whose bans every process of the fleet lists: the registry is in
// Redis. (This example needs a Redis server, so it is compiled, not run.)
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	bans, err := redisbans.New(redisbans.Config{Client: rdb, Prefix: "myapp:bans"})
	if err != nil {
		log.Fatal(err)
	}
	store := memory.New(memory.Config{}) // in a fleet: store/redis or store/memcached
	defer store.Close()
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
	_ = jail.Lift(ctx, "203.0.113.7") // from any process
}
