package notify_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/notify"
)

// blocked is a Deliverer that waits for its context: a hung receiver.
type blocked struct{}

func (blocked) Deliver(ctx context.Context, _ notify.Event) error {
	<-ctx.Done()
	return ctx.Err()
}

// BenchmarkTell is what a ban costs the decision that made it: the
// event, the audit trail, and a queue that is full behind a hung
// receiver (the drop path) or has room (drained by a worker that
// delivers nothing).
func BenchmarkTell(b *testing.B) {
	ban := guard.Ban{Jail: "login", Key: "203.0.113.7", Reason: "5 denials under rule login within 10m0s"}
	for _, bc := range []struct {
		name string
		d    notify.Deliverer
	}{{"hung", blocked{}}, {"free", nop{}}} {
		b.Run(bc.name, func(b *testing.B) {
			sink := notify.NewSink(bc.d, notify.SinkConfig{Queue: 100})
			defer sink.Close(canceled())
			trail := notify.NewTrail(notify.TrailConfig{})
			b.ReportAllocs()
			for b.Loop() {
				e := notify.NewEvent(notify.Ban, ban, "host/1", t0)
				trail.Add(e)
				sink.Notify(e)
			}
		})
	}
}

type nop struct{}

func (nop) Deliver(context.Context, notify.Event) error { return nil }

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
