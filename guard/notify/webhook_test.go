package notify_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/guard/notify"
)

const secret = "s3cret-for-tests-only"

// hostileKey holds what a shell would act on.
const hostileKey = `a b'c"d;e $(touch PWNED) ` + "`touch PWNED2` | & > x \\ \n"

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func event(key string) notify.Event {
	return notify.NewEvent(notify.Ban, guard.Ban{Jail: "login", Key: key, Reason: "5 denials", Since: t0, Until: t0.Add(time.Hour), Offences: 1}, "host/1", t0)
}

// receiver is a webhook receiver that checks every signature by its own
// HMAC, and records the events by ID.
type receiver struct {
	mu     sync.Mutex
	seen   map[string]int
	events []notify.Event
	bad    int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(r.Header.Get(notify.HeaderTimestamp) + "." + string(body)))
	want := "v1=" + hex.EncodeToString(m.Sum(nil))
	var e notify.Event
	err := json.Unmarshal(body, &e)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err != nil || !hmac.Equal([]byte(r.Header.Get(notify.HeaderSignature)), []byte(want)) ||
		notify.Verify([]byte(secret), r.Header, body, time.Now(), 0) != nil || r.Header.Get(notify.HeaderID) != e.ID {
		rc.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if rc.seen == nil {
		rc.seen = map[string]int{}
	}
	rc.seen[e.ID]++
	rc.events = append(rc.events, e)
}

func newWebhook(t *testing.T, url string) *notify.Webhook {
	t.Helper()
	w, err := notify.NewWebhook(notify.WebhookConfig{URL: url, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// counter is an Observer.
type counter struct {
	mu           sync.Mutex
	sent, failed int
	dropped      map[string]int
	sinks        map[string]bool
}

func (c *counter) Sent(s string)   { c.mu.Lock(); c.sent++; c.note(s); c.mu.Unlock() }
func (c *counter) Failed(s string) { c.mu.Lock(); c.failed++; c.note(s); c.mu.Unlock() }
func (c *counter) Dropped(s, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped == nil {
		c.dropped = map[string]int{}
	}
	c.dropped[reason]++
	c.note(s)
}
func (c *counter) note(s string) {
	if c.sinks == nil {
		c.sinks = map[string]bool{}
	}
	c.sinks[s] = true
}

// TestWebhookEachEventOnceSigned: every event reaches the receiver once,
// with a valid signature and its fields intact.
func TestWebhookEachEventOnceSigned(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	sink := notify.NewSink(newWebhook(t, srv.URL), notify.SinkConfig{Name: "hook", Workers: 4})
	want := map[string]notify.Event{}
	for i := range 200 {
		e := event("203.0.113." + strconv.Itoa(i))
		if i == 0 {
			e = event(hostileKey)
		}
		want[e.ID] = e
		if !sink.Notify(e) {
			t.Fatalf("Notify(%d) dropped with a queue of %d", i, notify.DefaultQueue)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink.Close(ctx)
	if rc.bad != 0 || len(rc.seen) != len(want) {
		t.Fatalf("receiver saw %d events, %d badly signed; want %d, none", len(rc.seen), rc.bad, len(want))
	}
	for _, e := range rc.events {
		if rc.seen[e.ID] != 1 {
			t.Errorf("event %s seen %d times", e.ID, rc.seen[e.ID])
		}
		w := want[e.ID]
		if e.Key != w.Key || e.Jail != "login" || e.Kind != notify.Ban || !e.Until.Equal(w.Until) || e.Network != w.Network || e.Source != "host/1" {
			t.Errorf("received %+v, want %+v", e, w)
		}
	}
	if w := want[rc.events[0].ID]; w.Network != "" && w.Network != w.Key+"/32" {
		t.Errorf("network of %q = %q", w.Key, w.Network)
	}
	if st := sink.Stats(); st.Sent != 200 || st.Failed != 0 {
		t.Errorf("Stats() = %+v, want 200 sent", st)
	}
}

// TestWebhookRetriesBounded: a receiver that fails forever gets Attempts
// tries per event, then the event is dropped and counted; one that
// refuses (4xx) gets one.
func TestWebhookRetriesBounded(t *testing.T) {
	for _, tc := range []struct {
		status       int
		wantRequests int64
	}{
		{http.StatusInternalServerError, 3 * 5},
		{http.StatusTooManyRequests, 3 * 5},
		{http.StatusBadRequest, 5},
		{http.StatusFound, 3 * 5},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			var requests atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				w.Header().Set("Location", "/elsewhere")
				w.WriteHeader(tc.status)
			}))
			defer srv.Close()
			obs := &counter{}
			sink := notify.NewSink(newWebhook(t, srv.URL), notify.SinkConfig{Name: "hook", Attempts: 3,
				MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, Observer: obs})
			for range 5 {
				sink.Notify(event("203.0.113.7"))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sink.Close(ctx)
			st := sink.Stats()
			if requests.Load() != tc.wantRequests || st.Attempts != 5 || st.Sent != 0 || st.Failed != tc.wantRequests {
				t.Errorf("%d requests, Stats %+v; want %d requests, 5 dropped after their attempts", requests.Load(), st, tc.wantRequests)
			}
			if obs.dropped[notify.DropAttempts] != 5 || obs.failed != int(tc.wantRequests) || !obs.sinks["hook"] {
				t.Errorf("Observer counted %+v", obs)
			}
		})
	}
}

// TestWebhookHungReceiver: 10,000 events behind a receiver that never
// answers: Notify returns every time, the queue never holds more than
// its cap, the rest are dropped and counted, and the trail has them all.
func TestWebhookHungReceiver(t *testing.T) {
	release := make(chan struct{})
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	const queue, n = 100, 10_000
	obs := &counter{}
	sink := notify.NewSink(newWebhook(t, srv.URL), notify.SinkConfig{Name: "hung", Queue: queue, Timeout: time.Hour, Observer: obs})
	trail := notify.NewTrail(notify.TrailConfig{MaxEntries: 2 * n})
	queued := 0
	for i := range n {
		e := event("198.51.100." + strconv.Itoa(i%256))
		trail.Add(e)
		if sink.Notify(e) {
			queued++
		}
		if st := sink.Stats(); st.Queued > st.Cap || st.Cap != queue {
			t.Fatalf("after %d events the queue holds %d of %d", i+1, st.Queued, st.Cap)
		}
	}
	if queued > queue+1 || queued < queue { // the queue, and the one the worker took
		t.Errorf("%d events queued, want %d or %d", queued, queue, queue+1)
	}
	if st := sink.Stats(); st.QueueFull != int64(n-queued) {
		t.Errorf("Stats().QueueFull = %d, want %d", st.QueueFull, n-queued)
	}
	if held, evicted := trail.Len(); held != n || evicted != 0 {
		t.Errorf("trail holds %d, evicted %d; want %d, 0", held, evicted, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	sink.Close(ctx) // gives up on the hung attempt
	st := sink.Stats()
	if total := st.Sent + st.Attempts + st.Closed + st.QueueFull; total != n || st.Queued != 0 {
		t.Errorf("Stats() = %+v: %d accounted for, want %d", st, total, n)
	}
	if obs.dropped[notify.DropQueueFull] != n-queued {
		t.Errorf("Observer counted %d dropped as queue_full, want %d", obs.dropped[notify.DropQueueFull], n-queued)
	}
}

// TestVerify refuses what is not signed by the secret, now.
func TestVerify(t *testing.T) {
	body := []byte(`{"event":"ban"}`)
	now := time.Unix(1_900_000_000, 0)
	header := func(ts time.Time, sig string) http.Header {
		h := http.Header{}
		h.Set(notify.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
		h.Set(notify.HeaderSignature, sig)
		return h
	}
	good := notify.Sign([]byte(secret), now, body)
	for _, tc := range []struct {
		name string
		h    http.Header
		body []byte
		ok   bool
	}{
		{"good", header(now, good), body, true},
		{"4 minutes old", header(now.Add(-4*time.Minute), notify.Sign([]byte(secret), now.Add(-4*time.Minute), body)), body, true},
		{"replayed 10 minutes later", header(now.Add(-10*time.Minute), notify.Sign([]byte(secret), now.Add(-10*time.Minute), body)), body, false},
		{"from the future", header(now.Add(10*time.Minute), notify.Sign([]byte(secret), now.Add(10*time.Minute), body)), body, false},
		{"other secret", header(now, notify.Sign([]byte("other"), now, body)), body, false},
		{"body changed", header(now, good), []byte(`{"event":"lift"}`), false},
		{"timestamp changed", header(now.Add(time.Second), good), body, false},
		{"no signature", header(now, ""), body, false},
		{"no version", header(now, good[3:]), body, false},
		{"no timestamp", http.Header{notify.HeaderSignature: {good}}, body, false},
	} {
		err := notify.Verify([]byte(secret), tc.h, tc.body, now, 0)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, notify.ErrSignature) {
			t.Errorf("%s: Verify = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestNewWebhookRefuses what cannot be a webhook.
func TestNewWebhookRefuses(t *testing.T) {
	for _, c := range []notify.WebhookConfig{
		{URL: "ftp://example.com/", Secret: "x"},
		{URL: "http:///path", Secret: "x"},
		{URL: "https://user:pass@example.com/", Secret: "x"},
		{URL: "::not a url", Secret: "x"},
		{URL: "https://example.com/"},
	} {
		if _, err := notify.NewWebhook(c); err == nil {
			t.Errorf("NewWebhook(%+v) = nil error", c)
		}
	}
}
