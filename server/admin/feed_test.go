package admin

import (
	"strings"
	"testing"
	"time"
)

// TestFeed checks that a snapshot is encoded once for every dashboard,
// that a slow dashboard keeps only the latest, and that the streams are
// bounded.
func TestFeed(t *testing.T) {
	f := NewFeed()
	if f.Watched() {
		t.Fatal("a new feed is watched")
	}
	var chs []chan []byte
	for range maxStreams {
		ch, ok := f.subscribe()
		if !ok {
			t.Fatalf("subscription %d refused, want %d", len(chs)+1, maxStreams)
		}
		chs = append(chs, ch)
	}
	if _, ok := f.subscribe(); ok {
		t.Errorf("subscription %d accepted: want at most %d", maxStreams+1, maxStreams)
	}
	for i := range 3 {
		if err := f.Publish(&Snapshot{Time: time.Unix(int64(i), 0).UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	first := <-chs[0]
	if !strings.HasPrefix(string(first), "event: snapshot\ndata: {\"time\":\"1970-01-01T00:00:02Z\"") || !strings.HasSuffix(string(first), "\n\n") {
		t.Errorf("event = %q, want the latest snapshot as an SSE event", first)
	}
	for i, ch := range chs[1:] {
		if ev := <-ch; &ev[0] != &first[0] {
			t.Fatalf("dashboard %d got its own encoding: want one shared by all", i+1)
		}
		if len(ch) != 0 {
			t.Fatalf("dashboard %d has %d snapshots queued, want only the latest", i+1, len(ch))
		}
	}
	for _, ch := range chs {
		f.unsubscribe(ch)
	}
	if f.Watched() {
		t.Error("watched after every dashboard left")
	}
	late, _ := f.subscribe()
	if ev := <-late; &ev[0] != &first[0] {
		t.Error("a dashboard that opens does not start with the latest snapshot")
	}
}
