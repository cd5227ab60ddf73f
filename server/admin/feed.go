package admin

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/wire"
)

// A Snapshot is what the dashboard shows of the moment: the rates of
// every rule over the last minutes, each rule's top limited keys and
// their state, and the bans. The service computes one a second while a
// dashboard is open, and a Feed sends it to all of them.
type Snapshot struct {
	Time time.Time `json:"time"`
	// Times are the Unix seconds of the samples of every rule's series,
	// oldest first.
	Times []int64    `json:"times"`
	Rules []RuleLive `json:"rules"`
	// Bans are the bans in force, at most MaxSnapshotBans of them, of
	// BansTotal; BansError says why they are missing.
	Bans      []wire.Ban `json:"bans"`
	BansTotal int        `json:"bans_total"`
	BansError string     `json:"bans_error,omitempty"`
	// Jails are the jails that lost strikes since the service started,
	// by name.
	Jails []JailLive `json:"jails,omitempty"`
	// Quota holds the edge quotas' buckets this replica has seen (the
	// RLQS streams it serves, the reports it was sent), by name.
	Quota []wire.QuotaStats `json:"quota,omitempty"`
}

// A JailLive is a jail of a Snapshot: the failures it was told of and
// did not count, or counted without those before, by reason
// ("estimated", "forgotten", "store-error"; see guard.StrikeLoss), as
// sluice_jail_strikes_lost_total counts them.
type JailLive struct {
	Name        string            `json:"name"`
	StrikesLost map[string]uint64 `json:"strikes_lost"`
}

// MaxSnapshotBans bounds the bans a Snapshot lists; the admin API lists
// them all.
const MaxSnapshotBans = 500

// A RuleLive is a rule of a Snapshot.
type RuleLive struct {
	Name string `json:"name"`
	// Mode is "enforce", or "shadow" for a rule that decides and counts
	// but never denies (a dry run): its denials are what it would have
	// denied.
	Mode string `json:"mode"`
	// Health is the state of the rule's store: "ok", "errors" (some
	// decisions failed in the last second) or "failing" (a circuit
	// breaker is open: the failure policy answers).
	Health string `json:"health"`
	// Allowed and Denied are decisions per second, one per Time.
	Allowed []float64 `json:"allowed"`
	Denied  []float64 `json:"denied"`
	// Top are the keys the rule denied most over the last TopWindow
	// seconds, heaviest first.
	Top       []TopKey `json:"top"`
	TopWindow int      `json:"top_window"`
}

// A TopKey is one of the keys a rule denied most, and its state now.
type TopKey struct {
	Key string `json:"key"`
	// Denials is the estimated number of denials in the window; at least
	// Denials-Error of them happened.
	Denials uint64 `json:"denials"`
	Error   uint64 `json:"error"`
	// State is "banned", "denied" (over the limit now), "allowed" or
	// "unknown" (the store did not answer, or the rule is a domain's).
	State      string    `json:"state"`
	RetryAfter float64   `json:"retry_after,omitempty"`
	Ban        *wire.Ban `json:"ban,omitempty"`
}

// maxStreams bounds the dashboards streaming at once.
const maxStreams = 64

// A Feed sends Snapshots to the dashboards streaming them (server-sent
// events): each Snapshot is encoded once, whatever the number of
// dashboards, and a dashboard too slow to take one misses it for the
// next. The zero value is not usable; use NewFeed. A Feed is safe for
// concurrent use.
type Feed struct {
	mu     sync.Mutex
	subs   map[chan []byte]struct{}
	last   []byte // the latest event, for dashboards that open
	closed chan struct{}
	once   sync.Once
}

// NewFeed returns a Feed with no dashboards.
func NewFeed() *Feed {
	return &Feed{subs: map[chan []byte]struct{}{}, closed: make(chan struct{})}
}

// Watched reports whether a dashboard is streaming: a Snapshot need not
// be computed while none is.
func (f *Feed) Watched() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs) > 0
}

// Publish sends s to every dashboard streaming.
func (f *Feed) Publish(s *Snapshot) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	ev := make([]byte, 0, len(data)+24)
	ev = append(append(append(ev, "event: snapshot\ndata: "...), data...), "\n\n"...)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = ev
	for ch := range f.subs {
		select { // a full channel holds an older snapshot: replace it
		case <-ch:
		default:
		}
		ch <- ev
	}
	return nil
}

// Close ends every stream and refuses new ones: call it when the server
// shuts down, which would otherwise wait for them.
func (f *Feed) Close() { f.once.Do(func() { close(f.closed) }) }

// subscribe registers a dashboard; false when there are maxStreams.
func (f *Feed) subscribe() (chan []byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs) >= maxStreams {
		return nil, false
	}
	ch := make(chan []byte, 1)
	if f.last != nil {
		ch <- f.last
	}
	f.subs[ch] = struct{}{}
	return ch, true
}

func (f *Feed) unsubscribe(ch chan []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, ch)
}

// streamWrite bounds the write of one event to a dashboard.
const streamWrite = 10 * time.Second

// ServeHTTP streams the snapshots as server-sent events ("snapshot"),
// starting with the latest, until the dashboard leaves or the Feed
// closes.
func (f *Feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case <-f.closed:
		writeError(w, http.StatusServiceUnavailable, "shutting down")
		return
	default:
	}
	ch, ok := f.subscribe()
	if !ok {
		writeError(w, http.StatusServiceUnavailable, "too many dashboards streaming")
		return
	}
	defer f.unsubscribe(ch)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ev := []byte("retry: 2000\n\n")
	for {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWrite))
		if _, err := w.Write(ev); err != nil || rc.Flush() != nil {
			return
		}
		select {
		case ev = <-ch:
		case <-r.Context().Done():
			return
		case <-f.closed:
			return
		}
	}
}
