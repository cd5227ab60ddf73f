package memcached_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memcached"
)

// A fleet of three servers: each actor lives on the server its name
// hashes to by ketama, the same one libketama-compatible clients pick.
// Placement needs no connection.
func ExampleStore_Server() {
	store, err := memcached.New(memcached.Config{Addrs: []string{"10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11211"}})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	for _, actor := range []string{"sluice:login:alice", "sluice:login:carol", "sluice:login:dave"} {
		fmt.Println(actor, "→", store.Server(actor))
	}
	// Output:
	// sluice:login:alice → 10.0.0.3:11211
	// sluice:login:carol → 10.0.0.2:11211
	// sluice:login:dave → 10.0.0.1:11211
}

// A limiter of 5 login attempts per minute per user in a sliding window,
// with state in memcached. (Not run: it needs a server.)
func ExampleNew() {
	store, err := memcached.New(memcached.Config{Addrs: []string{"127.0.0.1:11211"}})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	lim, err := sluice.New(store, sluice.Config{
		Action: "login",
		Limits: []sluice.Limit{{Rate: 5, Period: time.Minute, Algorithm: sluice.SlidingWindow}},
	})
	if err != nil {
		log.Fatal(err)
	}
	d, err := lim.Allow(context.Background(), "alice")
	if err != nil {
		log.Fatal(err) // memcached failed: see package store/fallback
	}
	fmt.Println(d.Allowed, d.Remaining)
}
