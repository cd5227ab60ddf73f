package redis_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/redis"
)

// Key names the Redis key of each limit of an actor: the hash tag comes
// first, so braces in the actor's name cannot move it, and every limit of
// the actor lands on the same Cluster slot.
func ExampleKey() {
	perSecond := sluice.Limit{Rate: 10, Period: time.Second}
	perHour := sluice.Limit{Rate: 1000, Period: time.Hour, Algorithm: sluice.SlidingWindow}
	fmt.Println(redis.Key("sluice:login:", "{alice}", perSecond))
	fmt.Println(redis.Key("sluice:login:", "{alice}", perHour))
	// Output:
	// {a2f2209f}=sluice:login:{alice}:c2bb66d3956bc07c
	// {a2f2209f}=sluice:login:{alice}:bac7270b8e4a96b2
}
