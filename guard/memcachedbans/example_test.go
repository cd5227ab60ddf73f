package memcachedbans_test

import (
	"context"
	"log"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/memcachedbans"
	"github.com/sluicehq/sluice/store/memcached"
)

// A jail whose bans every process of a memcached fleet enforces: the
// bans live in pages beside the limiter state. (This example needs a
// memcached server, so it is compiled, not run.)
func Example() {
	ctx := context.Background()
	addrs := []string{"127.0.0.1:11211"}
	store, err := memcached.New(memcached.Config{Addrs: addrs})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	bans, err := memcachedbans.New(ctx, memcachedbans.Config{Addrs: addrs, Prefix: "myapp:bans"})
	if err != nil {
		log.Fatal(err)
	}
	defer bans.Close()
	jail, err := guard.NewJail(store, guard.JailConfig{Name: "login", MaxFailures: 3, Registry: bans})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := jail.Ban(ctx, "198.51.100.0/24", time.Hour, "scraping"); err != nil {
		log.Print(err) // enforced here all the same; written at the next poll
	}
}
