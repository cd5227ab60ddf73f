package sluice_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

// At most two reports per tenant run at once; a third waits or is
// refused, and a sheddable request is refused sooner, keeping room for
// critical ones.
func ExampleConcurrency() {
	store := memory.New(memory.Config{})
	defer store.Close()
	reports, err := sluice.NewConcurrency(store, sluice.ConcurrencyConfig{Action: "reports", Limit: 2})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	first, _ := reports.Acquire(ctx, "tenant-1", sluice.ClassDefault)
	fmt.Println("first:", first.Allowed, first.InUse, "of", first.Limit)
	shed, _ := reports.Acquire(ctx, "tenant-1", sluice.ClassSheddable)
	fmt.Println("sheddable at 1 of 2:", shed.Allowed)
	second, _ := reports.Acquire(ctx, "tenant-1", sluice.ClassCritical)
	third, _ := reports.Acquire(ctx, "tenant-1", sluice.ClassCritical)
	fmt.Println("second:", second.Allowed, "third:", third.Allowed)
	_ = first.Release(ctx)
	again, _ := reports.Acquire(ctx, "tenant-1", sluice.ClassCritical)
	fmt.Println("after a release:", again.Allowed)
	// Output:
	// first: true 1 of 2
	// sheddable at 1 of 2: false
	// second: true third: false
	// after a release: true
}
